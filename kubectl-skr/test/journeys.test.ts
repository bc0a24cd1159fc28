// kubectl-skr as the on-call engineer uses it, against a real KCP: run the binary, read stdout, stderr and the exit
// code. The fleet is shaped by writing Kyma status directly, as the agent would have left it.
import { describe, it, before } from 'mocha';
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { LABELS } from '@skr-watcher/api';
import { sharedEnvironment } from '@skr-watcher/testenv';
import { waitUntil } from '../../test/support/eventually.js';
import {
  ON_CALL_RULES,
  READ_ONLY_RULES,
  createKyma,
  createKymaEvent,
  createWebhookCertificate,
  kubeconfigFileAs,
  ref,
  writeKymaStatus,
} from './fleet.js';
import { auditLines, buildPlugin, kubectlSkr, startPlugin } from './plugin.js';

const connected = {
  type: 'SKRConnected',
  status: 'True',
  reason: 'Connected',
  message: 'SKR API server https://skr.test',
} as const;
const webhookInstalled = {
  type: 'SKRWebhook',
  status: 'True',
  reason: 'Installed',
  message: 'webhook installed',
} as const;
const greeter = (state: string, version: string) => ({
  name: 'greeter',
  state,
  version,
  manifest: {
    state,
    lastOperation: state === 'Ready' ? 'installation is ready and resources can be used' : 'x',
  },
});

describe('kubectl-skr journeys on a real KCP', function () {
  this.timeout(180_000);
  const namespace = `kskr-${randomBytes(4).toString('hex')}`;
  let admin: KubeConfig;
  let adminKubeconfig: string;
  let onCall: { path: string; username: string };
  let readOnly: { path: string; username: string };
  const as = (kubeconfig: string, ...args: string[]) =>
    kubectlSkr([...args, '--kubeconfig', kubeconfig, '-n', namespace]);
  const asAdmin = (...args: string[]) => as(adminKubeconfig, ...args);
  const readKyma = async (name: string) =>
    (await admin
      .makeApiClient(CustomObjectsApi)
      .getNamespacedCustomObject({ ...ref('kyma', namespace), name })) as {
      metadata: { labels?: Record<string, string>; annotations?: Record<string, string> };
      status?: { state?: string };
    };
  const eventsOf = async (name: string) =>
    (
      await admin.makeApiClient(CoreV1Api).listNamespacedEvent({
        namespace,
        fieldSelector: `involvedObject.name=${name}`,
      })
    ).items;

  before(async function () {
    buildPlugin();
    const kcp = (await sharedEnvironment()).plane('kcp');
    admin = kcp.kubeConfig();
    adminKubeconfig = kcp.kubeconfigPath;
    await admin.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
    await createKyma(admin, namespace, 'healthy', {
      state: 'Ready',
      conditions: [
        connected,
        webhookInstalled,
        { type: 'Modules', status: 'True', reason: 'Ready', message: '1 module(s) ready' },
      ],
      modules: [greeter('Ready', '1.0.0')],
    });
    await createWebhookCertificate(admin, namespace, 'healthy', 1);
    await createKyma(admin, namespace, 'unreachable', {
      state: 'Error',
      conditions: [
        {
          type: 'SKRConnected',
          status: 'False',
          reason: 'KubeconfigMissing',
          message: `no Secret in ${namespace} labelled ${LABELS.kymaName}=unreachable with key config`,
        },
      ],
    });
    await createKymaEvent(admin, namespace, 'unreachable', 'ReconcileFailed', 'the first failure', 30);
    await createKymaEvent(admin, namespace, 'unreachable', 'KubeconfigMissing', 'the latest failure', 2);
    const registryDown = 'registry registry.test is unreachable (ECONNREFUSED)';
    await createKyma(admin, namespace, 'registry-down', {
      state: 'Error',
      conditions: [
        connected,
        { type: 'Modules', status: 'False', reason: 'ModulesNotReady', message: `greeter: ${registryDown}` },
      ],
      modules: [
        {
          ...greeter('Error', '1.1.0'),
          message: registryDown,
          manifest: { state: 'Error', lastOperation: registryDown },
        },
      ],
    });
    await createKyma(admin, namespace, 'webhook-silent', {
      state: 'Warning',
      conditions: [
        connected,
        {
          type: 'SKRWebhook',
          status: 'False',
          reason: 'NoEventFromWebhook',
          message: 'the SKR webhook sent no event within 60 s of a probe',
        },
      ],
      modules: [greeter('Ready', '1.0.0')],
    });
    await createWebhookCertificate(admin, namespace, 'webhook-silent', 50);
    await createKyma(admin, namespace, 'fresh', {});
    onCall = await kubeconfigFileAs(admin, namespace, 'oncall', ON_CALL_RULES);
    readOnly = await kubeconfigFileAs(admin, namespace, 'reader', READ_ONLY_RULES);
  });

  it('status: Kymas and modules by state and version, the unhealthy first with their reason, the Ready counted', async () => {
    const run = await asAdmin('status');
    expect(run.code, run.stderr).to.equal(0);
    const lines = run.stdout.split('\n');
    expect(lines[0]).to.equal(`5 Kymas in ${namespace}: 2 Error, 1 Warning, 1 Unknown, 1 Ready`);
    expect(run.stdout).to.match(/greeter\s+3\s+1 Error, 2 Ready\s+1\.0\.0 ×2, 1\.1\.0 ×1/);
    const order = ['registry-down', 'unreachable', 'webhook-silent', 'fresh'].map((name) =>
      lines.findIndex((line) => line.startsWith(`${name} `)),
    );
    expect(order.every((at) => at > 0)).to.equal(true, run.stdout);
    expect([...order].sort((a, b) => a - b)).to.deep.equal(order);
    expect(lines.find((line) => line.startsWith('unreachable '))).to.include(
      'SKRConnected KubeconfigMissing: no Secret',
    );
    expect(lines.find((line) => line.startsWith('registry-down '))).to.include(
      'Modules ModulesNotReady: greeter: registry',
    );
    expect(lines.some((line) => line.startsWith('healthy '))).to.equal(false);
    expect(run.stdout).to.include('1 Ready Kyma(s) not listed (-o wide lists every Kyma)');
  });

  it('status -o wide lists every Kyma; -o json and -o yaml carry the same report for scripts', async () => {
    const wide = await asAdmin('status', '-o', 'wide');
    expect(wide.code, wide.stderr).to.equal(0);
    expect(wide.stdout).to.match(/^healthy\s+Ready\s+runtime-healthy\s+1\/1/m);
    expect(wide.stdout).to.include('CHANNEL');
    const json = await asAdmin('status', '-o', 'json');
    expect(json.code, json.stderr).to.equal(0);
    const report = JSON.parse(json.stdout) as {
      kymas: { total: number; states: Record<string, number> };
      rows: { name: string; state: string }[];
    };
    expect(report.kymas).to.deep.include({
      total: 5,
      states: { Error: 2, Warning: 1, Unknown: 1, Ready: 1 },
    });
    expect(report.rows.map((row) => row.name)).to.deep.equal([
      'registry-down',
      'unreachable',
      'webhook-silent',
      'fresh',
      'healthy',
    ]);
    const yaml = await asAdmin('status', '-o', 'yaml');
    expect(yaml.code, yaml.stderr).to.equal(0);
    expect(yaml.stdout).to.match(/^kymas:\n {2}total: 5/m);
  });

  it('status --watch prints the report again when a Kyma changes, and ends cleanly on SIGTERM', async () => {
    const child = startPlugin([
      'status',
      '--watch',
      '--interval',
      '300ms',
      '--kubeconfig',
      adminKubeconfig,
      '-n',
      namespace,
    ]);
    let stdout = '';
    child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    await waitUntil('the first report', () => stdout.includes('Kymas in'), 30_000);
    expect(stdout).to.match(/^fresh\s+Unknown\s.*no status yet: no agent pass has written one$/m);
    await writeKymaStatus(admin, namespace, 'fresh', { state: 'Processing' });
    await waitUntil('a second report', () => /\n# \d{4}-/.test(stdout), 30_000);
    const second = stdout.slice(stdout.search(/\n# \d{4}-/));
    expect(second).to.match(/^fresh\s+Processing/m);
    child.kill('SIGTERM');
    expect(await exited).to.equal(0);
  });

  it('explain: an unreachable SKR names SkrUnreachable and its first step, with the Events oldest first', async () => {
    const run = await asAdmin('explain', 'unreachable');
    expect(run.code, run.stderr).to.equal(0);
    expect(run.stdout).to.include(`Kyma:         ${namespace}/unreachable`);
    expect(run.stdout).to.match(/SKR:\s+NOT connected: KubeconfigMissing: no Secret/);
    expect(run.stdout).to.match(/Webhook:\s+not reported/);
    expect(run.stdout).to.match(/Certificate:\s+none in Secret unreachable-webhook-tls/);
    expect(run.stdout).to.include(
      'SkrUnreachable (docs/runbooks/SkrUnreachable.md): SKRConnected is False (KubeconfigMissing)',
    );
    expect(run.stdout).to.include(
      `first step: the kubeconfig Secret: kubectl get secrets -n ${namespace} -l operator.kyma-project.io/kyma-name=unreachable`,
    );
    const first = run.stdout.indexOf('the first failure');
    const latest = run.stdout.indexOf('the latest failure');
    expect(first).to.be.greaterThan(0);
    expect(latest).to.be.greaterThan(first);
  });

  it('explain: a module failing on the registry shows its Manifest and last operation, and SkrModuleRegistryFailing', async () => {
    const run = await asAdmin('explain', 'registry-down');
    expect(run.code, run.stderr).to.equal(0);
    expect(run.stdout).to.match(
      /greeter\s+Error\s+1\.1\.0\s+regular\s+registry-down-greeter \(Error\)\s+registry registry\.test is unreachable/,
    );
    expect(run.stdout).to.include('SkrModuleRegistryFailing (docs/runbooks/SkrModuleRegistryFailing.md)');
    expect(run.stdout).not.to.include('SkrModulesInError');
  });

  it('explain: a silent webhook and a certificate past renewal name SkrWebhookSilent and SkrCertificateNotRenewed', async () => {
    const run = await asAdmin('explain', 'webhook-silent');
    expect(run.code, run.stderr).to.equal(0);
    expect(run.stdout).to.match(/Webhook:\s+UNHEALTHY: NoEventFromWebhook: the SKR webhook sent no event/);
    expect(run.stdout).to.match(
      /Certificate:\s+expires \S+ \(in (9|10) d\), renewal OVERDUE; CN runtime-webhook-silent/,
    );
    expect(run.stdout).to.include('SkrWebhookSilent (docs/runbooks/SkrWebhookSilent.md)');
    expect(run.stdout).to.include('SkrCertificateNotRenewed (docs/runbooks/SkrCertificateNotRenewed.md)');
  });

  it('explain: a Ready Kyma says there is nothing to do; -o json carries the certificate expiry', async () => {
    const run = await asAdmin('explain', 'healthy');
    expect(run.code, run.stderr).to.equal(0);
    expect(run.stdout).to.match(/Certificate:\s+expires \S+ \(in 5[89] d\), renewal due/);
    expect(run.stdout).to.include('nothing: the Kyma is Ready');
    const json = await asAdmin('explain', 'healthy', '-o', 'json');
    const data = JSON.parse(json.stdout) as {
      kyma: { certificate: { kind: string; notAfter: string } };
      advice: unknown[];
    };
    expect(data.kyma.certificate.kind).to.equal('found');
    expect(new Date(data.kyma.certificate.notAfter).getTime()).to.be.greaterThan(
      Date.now() + 58 * 86_400_000,
    );
    expect(data.advice).to.deep.equal([]);
  });

  it('explain of a Kyma that does not exist fails with one clear line', async () => {
    const run = await asAdmin('explain', 'nope');
    expect(run.code).to.equal(1);
    expect(run.stderr).to.equal(`error: kyma "nope" not found in ${namespace}\n`);
  });

  it('pause and resume record who and why: label, annotations, an Event and an audit line naming the caller', async () => {
    const paused = await as(onCall.path, 'pause', 'healthy', '--reason', 'INC-1: restoring the kubeconfig');
    expect(paused.code, paused.stderr).to.equal(0);
    expect(paused.stdout).to.include(`paused ${namespace}/healthy`);
    const [audit] = auditLines(paused.stderr);
    expect(audit).to.deep.include({
      user: onCall.username,
      action: 'pause',
      kyma: `${namespace}/healthy`,
      reason: 'INC-1: restoring the kubeconfig',
      outcome: 'done',
    });
    expect(Date.parse(String(audit?.['time']))).to.be.closeTo(Date.now(), 60_000);
    let kyma = await readKyma('healthy');
    expect(kyma.metadata.labels?.[LABELS.skipReconciliation]).to.equal('true');
    expect(kyma.metadata.annotations?.['operator.kyma-project.io/skip-reconciliation-by']).to.equal(
      onCall.username,
    );
    expect(kyma.metadata.annotations?.['operator.kyma-project.io/skip-reconciliation-reason']).to.equal(
      'INC-1: restoring the kubeconfig',
    );
    const pauseEvent = (await eventsOf('healthy')).find((e) => e.reason === 'ReconciliationPaused');
    expect(pauseEvent?.message).to.equal(
      `reconciliation paused by ${onCall.username}: INC-1: restoring the kubeconfig`,
    );

    const status = await asAdmin('status');
    expect(status.stdout).to.include('(1 paused)');
    expect(status.stdout).to.match(
      new RegExp(`^healthy\\s+Ready\\s+runtime-healthy\\s+1/1\\s+by ${onCall.username}`, 'm'),
    );
    const explained = await asAdmin('explain', 'healthy');
    expect(explained.stdout).to.match(new RegExp(`Paused:\\s+yes, by ${onCall.username} since \\S+: INC-1`));
    expect(explained.stdout).to.include(`kubectl skr resume healthy -n ${namespace}`);

    const again = await as(onCall.path, 'pause', 'healthy', '--reason', 'twice');
    expect(again.code).to.equal(0);
    expect(again.stdout).to.include(`is already paused by ${onCall.username}`);
    expect(auditLines(again.stderr)[0]).to.deep.include({ outcome: 'unchanged' });

    const reconcile = await as(onCall.path, 'reconcile', 'healthy');
    expect(reconcile.code).to.equal(1);
    expect(reconcile.stderr).to.include(`error: ${namespace}/healthy is paused by ${onCall.username}`);
    expect(auditLines(reconcile.stderr)[0]).to.deep.include({ action: 'reconcile', outcome: 'failed' });

    const resumed = await as(onCall.path, 'resume', 'healthy', '--reason', 'kubeconfig restored');
    expect(resumed.code, resumed.stderr).to.equal(0);
    expect(auditLines(resumed.stderr)[0]).to.deep.include({
      user: onCall.username,
      action: 'resume',
      outcome: 'done',
    });
    kyma = await readKyma('healthy');
    expect(kyma.metadata.labels ?? {}).not.to.have.property(LABELS.skipReconciliation);
    expect(kyma.metadata.annotations ?? {}).not.to.have.property(
      'operator.kyma-project.io/skip-reconciliation-by',
    );
    const resumeEvent = (await eventsOf('healthy')).find((e) => e.reason === 'ReconciliationResumed');
    expect(resumeEvent?.message).to.match(
      new RegExp(
        `^reconciliation resumed by ${onCall.username}: kubeconfig restored \\(was paused by ${onCall.username}`,
      ),
    );
  });

  it('a read-only identity reads the fleet but is refused pause in one clear line, audited, with the Kyma unchanged', async () => {
    const status = await as(readOnly.path, 'status');
    expect(status.code, status.stderr).to.equal(0);
    const explained = await as(readOnly.path, 'explain', 'healthy');
    expect(explained.code, explained.stderr).to.equal(0);
    expect(explained.stdout).to.match(
      new RegExp(`Certificate:\\s+not shown: you may not get secrets in ${namespace}: `),
    );

    const refused = await as(readOnly.path, 'pause', 'healthy', '--reason', 'trying');
    expect(refused.code).to.equal(1);
    const errors = refused.stderr.split('\n').filter((line) => line.startsWith('error:'));
    expect(errors).to.have.length(1);
    expect(errors[0]).to.match(
      new RegExp(`^error: you may not patch kymas in ${namespace}: .*cannot patch resource "kymas"`),
    );
    expect(auditLines(refused.stderr)[0]).to.deep.include({
      user: readOnly.username,
      action: 'pause',
      outcome: 'refused',
    });
    const kyma = await readKyma('healthy');
    expect(kyma.metadata.labels ?? {}).not.to.have.property(LABELS.skipReconciliation);

    const reconcile = await as(readOnly.path, 'reconcile', 'healthy');
    expect(reconcile.code).to.equal(1);
    expect(reconcile.stderr).to.match(new RegExp(`^error: you may not patch kymas in ${namespace}: `, 'm'));
  });

  it('follows kubectl conventions: --help with examples, --version, --context, completion, usage errors', async () => {
    const help = await kubectlSkr(['--help']);
    expect(help.code).to.equal(0);
    expect(help.stdout).to.include('Examples:');
    expect(help.stdout).to.include('kubectl skr pause my-kyma --reason');
    expect((await kubectlSkr(['--version'])).stdout).to.match(/^kubectl-skr \d+\.\d+\.\d+ \(revision /);
    const context = await asAdmin('status', '--context', 'elsewhere');
    expect(context.code).to.equal(1);
    expect(context.stderr).to.match(/^error: context "elsewhere" is not in the kubeconfig \(it has: /);
    const bash = await kubectlSkr(['completion', 'bash']);
    expect(bash.stdout).to.include('complete -o default -F _kubectl_skr kubectl-skr');
    expect((await kubectlSkr(['completion', 'zsh'])).stdout).to.include('#compdef kubectl-skr');
    const kymas = await kubectlSkr([
      '__complete',
      'explain',
      '--kubeconfig',
      adminKubeconfig,
      '-n',
      namespace,
      'un',
    ]);
    expect(kymas.stdout).to.equal('unreachable\n');
    const usage = await asAdmin('pause', 'healthy');
    expect(usage.code).to.equal(2);
    expect(usage.stderr).to.include("required option '--reason <text>' not specified");
    const noKubeconfig = await kubectlSkr(['status']);
    expect(noKubeconfig.code).to.equal(1);
    expect(noKubeconfig.stderr.split('\n').filter(Boolean)).to.have.length(1);
  });
});
