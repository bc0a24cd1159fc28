// `kubectl skr reconcile` against the real agent (its controller and reconciler on a real KCP and SKR): the annotation
// the plugin writes wakes the agent's Kyma watch and a pass runs at once, long before any requeue would have.
import { describe, it, before, after } from 'mocha';
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS } from '@skr-watcher/api';
import { sharedEnvironment } from '@skr-watcher/testenv';
import { createController, type Controller } from '../../agent/src/controller.js';
import { createManager, type Manager } from '../../agent/src/manager/index.js';
import { waitUntil } from '../../test/support/eventually.js';
import { ref, writeKymaStatus } from './fleet.js';
import { auditLines, buildPlugin, kubectlSkr } from './plugin.js';

/** Long enough that no requeue or resync runs a pass during the test: only a watch event can. */
const NO_REQUEUE_MS = 10 * 60_000;

describe('kubectl-skr reconcile with the agent running', function () {
  this.timeout(180_000);
  const namespace = `kskr-agent-${randomBytes(4).toString('hex')}`;
  let admin: KubeConfig;
  let kubeconfig: string;
  let manager: Manager;
  let controller: Controller;
  const stateOf = async (name: string) =>
    (
      (await admin
        .makeApiClient(CustomObjectsApi)
        .getNamespacedCustomObject({ ...ref('kyma', namespace), name })) as {
        status?: { state?: string; conditions?: { type: string; reason: string }[] };
      }
    ).status;

  before(async () => {
    buildPlugin();
    const env = await sharedEnvironment();
    const kcp = env.plane('kcp');
    admin = kcp.kubeConfig();
    kubeconfig = kcp.kubeconfigPath;
    await admin.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
    await admin.makeApiClient(CoreV1Api).createNamespacedSecret({
      namespace,
      body: {
        metadata: { name: 'kubeconfig-lonely', namespace, labels: { [LABELS.kymaName]: 'lonely' } },
        stringData: { config: await readFile(env.plane('skr1').kubeconfigPath, 'utf8') },
      },
    });
    manager = createManager({
      kcp: admin,
      namespace,
      requeue: {
        Ready: NO_REQUEUE_MS,
        Processing: NO_REQUEUE_MS,
        Warning: NO_REQUEUE_MS,
        Error: NO_REQUEUE_MS,
      },
    });
    controller = createController({
      kcp: admin,
      namespace,
      reconciler: manager.reconciler,
      workers: 1,
      resyncMs: NO_REQUEUE_MS,
    });
    await controller.start();
  });

  after(async () => {
    await controller?.stop();
    await manager?.close();
  });

  it('reconcile wakes a pass at once: a status written behind the agent is put back, and the run says so', async () => {
    // An SKR Kyma in a namespace of its own, so suites that share the SKR never touch each other's objects.
    await admin.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      ...ref('kyma', namespace),
      body: {
        apiVersion: `${GROUP}/${KINDS.kyma.version}`,
        kind: 'Kyma',
        metadata: { name: 'lonely', namespace, labels: { [LABELS.runtimeId]: `runtime-${namespace}` } },
        spec: { modules: [], sync: { namespace } },
      },
    });
    await waitUntil('the first pass', async () => (await stateOf('lonely'))?.state === 'Ready', 60_000);
    await controller.queue.whenIdle();
    // A status the agent did not write; status writes wake no pass, and a Ready Kyma's next look is far off.
    await writeKymaStatus(admin, namespace, 'lonely', { state: 'Error' });
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await controller.queue.whenIdle();
    expect((await stateOf('lonely'))?.state).to.equal('Error');

    const run = await kubectlSkr([
      'reconcile',
      'lonely',
      '--reason',
      'after the fix',
      '--wait',
      '30s',
      '--kubeconfig',
      kubeconfig,
      '-n',
      namespace,
    ]);
    expect(run.code, run.stderr).to.equal(0);
    expect(run.stdout).to.include(`reconcile requested for ${namespace}/lonely`);
    expect(run.stdout).to.include('the pass wrote the status: state Ready');
    const status = await stateOf('lonely');
    expect(status?.state).to.equal('Ready');
    expect(status?.conditions?.find((c) => c.type === 'SKRConnected')?.reason).to.equal('Connected');
    expect(auditLines(run.stderr)[0]).to.deep.include({
      user: 'admin',
      action: 'reconcile',
      kyma: `${namespace}/lonely`,
      reason: 'after the fix',
      outcome: 'done',
    });
    const events = await admin.makeApiClient(CoreV1Api).listNamespacedEvent({
      namespace,
      fieldSelector: 'involvedObject.name=lonely,reason=ReconcileRequested',
    });
    expect(events.items.map((e) => e.message)).to.deep.equal(['reconcile requested by admin: after the fix']);
  });
});
