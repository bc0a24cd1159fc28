// `skr-certs rotate-ca` leaves an audit trail on a real KCP API server, as kubectl-skr's admin actions do: one JSON
// audit line on stderr per run naming the caller as the API server knows them (SelfSubjectReview), what was done, on
// which scope, when and why; and, for a run that carried out a step, a Normal Event on the CA Secret naming them. A
// dry run changes nothing and records no Event; a failed run still writes its audit line.
import { describe, it, before } from 'mocha';
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { AuthenticationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { sharedEnvironment } from '@skr-watcher/testenv';
import { CA_SECRET_NAME } from '@skr-watcher/pki';
import { buildBinary, skrCerts } from './skr-certs-binary.js';

interface AuditEntry {
  audit: boolean;
  component: string;
  time: string;
  user: string;
  action: string;
  scope: string;
  reason: string;
  outcome: string;
  detail: string;
}

const auditLines = (stderr: string): AuditEntry[] =>
  stderr
    .split('\n')
    .filter((line) => line.startsWith('{"audit":true'))
    .map((line) => JSON.parse(line) as AuditEntry);

describe('skr-certs rotate-ca audit trail on a real KCP plane', function () {
  this.timeout(180_000);
  let kubeconfig: string;
  let core: CoreV1Api;
  let caller = '';

  before(async function () {
    buildBinary();
    const kcp = (await sharedEnvironment()).plane('kcp');
    kubeconfig = kcp.kubeconfigPath;
    core = kcp.kubeConfig().makeApiClient(CoreV1Api);
    const review = await kcp
      .kubeConfig()
      .makeApiClient(AuthenticationV1Api)
      .createSelfSubjectReview({
        body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
      });
    caller = review.status?.userInfo?.username ?? '';
    expect(caller).not.to.equal('');
  });

  const rotate = (namespace: string, ...more: string[]) =>
    skrCerts(['rotate-ca', '--kubeconfig', kubeconfig, '-n', namespace, '--key-bits', '2048', ...more]);

  it('records who rotated, what, on which scope and why, with an Event on the CA Secret', async () => {
    const namespace = `certs-audit-${randomBytes(4).toString('hex')}`;
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    const init = await skrCerts([
      'init-ca',
      '--kubeconfig',
      kubeconfig,
      '-n',
      namespace,
      '--key-bits',
      '2048',
    ]);
    expect(init.code, init.stderr).to.equal(0);

    const before = Date.now();
    const plan = await rotate(namespace, '--dry-run', '--reason', 'yearly rotation, dry run');
    expect(plan.code, plan.stderr).to.equal(0);
    const [planned] = auditLines(plan.stderr);
    expect(planned).to.deep.include({
      audit: true,
      component: 'skr-certs',
      user: caller,
      action: 'rotate-ca',
      reason: 'yearly rotation, dry run',
      outcome: 'unchanged',
    });
    expect(planned?.detail).to.contain('dry run, nothing written');

    const run = await rotate(namespace, '--steps', '2', '--reason', 'CHG-42 yearly rotation');
    expect(run.code, run.stderr).to.equal(0);
    const lines = auditLines(run.stderr);
    expect(lines).to.have.length(1);
    const [line] = lines;
    expect(line).to.deep.include({
      component: 'skr-certs',
      user: caller,
      action: 'rotate-ca',
      reason: 'CHG-42 yearly rotation',
      outcome: 'done',
    });
    expect(line?.scope).to.contain(`${namespace}/${CA_SECRET_NAME}`);
    expect(line?.detail).to.match(/start: new CA .* pending; trust-new-ca: .*; phase /);
    expect(new Date(line?.time ?? 0).getTime()).to.be.within(before - 1000, Date.now());
    expect(line?.detail).not.to.contain('Event not recorded');

    const events = await core.listNamespacedEvent({
      namespace,
      fieldSelector: `involvedObject.name=${CA_SECRET_NAME},involvedObject.kind=Secret`,
    });
    expect(events.items).to.have.length(
      1,
      'one Event for the run that changed something, none for the dry run',
    );
    const [event] = events.items;
    expect(event).to.deep.include({ type: 'Normal', reason: 'CaRotationProgressed', action: 'rotate-ca' });
    expect(event?.reportingComponent).to.equal('skr-certs');
    expect(event?.reportingInstance).to.equal(caller.slice(0, 128));
    expect(event?.message).to.contain(`rotate-ca by ${caller} (CHG-42 yearly rotation)`);
  });

  it('writes its audit line when the rotation fails', async () => {
    const namespace = `certs-audit-${randomBytes(4).toString('hex')}`;
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    const run = await rotate(namespace, '--reason', 'no CA here yet');
    expect(run.code).to.equal(1);
    const [line] = auditLines(run.stderr);
    expect(line).to.deep.include({
      user: caller,
      action: 'rotate-ca',
      outcome: 'failed',
      reason: 'no CA here yet',
    });
    expect(line?.detail).to.contain('skr-watcher-ca not found');
  });
});
