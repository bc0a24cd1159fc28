// The targeted path of a SyncResource change (decision 024): the real controller and reconciler on the shared KCP and
// SKR, with every full reconcile of the test's Kyma held after its first pass. A SyncResource created or edited then
// still reaches the SKR (and its status is written), within the allow-list: only the targeted path can have done it.
// Without it, a SyncResource change only wakes the held full reconcile and nothing arrives.
import { expect } from 'chai';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS, MODULE_MIRROR } from '@skr-watcher/api';
import { mergePatchCustomObject } from '@skr-watcher/kube';
import { sharedEnvironment } from '@skr-watcher/testenv';
import { createLogger, createRegistry } from '@skr-watcher/telemetry';
import { readFile } from 'node:fs/promises';
import { createController, type Controller } from '../src/controller.js';
import { createTargetedRouter } from '../src/targeted/router.js';
import { createManager, type Manager } from '../src/manager/index.js';
import { eventually } from '../../test/support/eventually.js';
import { custom, getOrUndefined, refTo, untilCrdsServe, untilInWatchCache } from './support/planes.js';

const HOUR_MS = 3_600_000;
const QUIET_REQUEUE = { Ready: HOUR_MS, Processing: HOUR_MS, Warning: HOUR_MS, Error: HOUR_MS };
/** Generous: two loaded cores; the targeted path takes milliseconds when quiet. */
const ARRIVES_MS = 60_000;

describe('targeted SyncResource apply: a change reaches the SKR without a full Kyma reconcile (real KCP and SKR)', function () {
  this.timeout(300_000);
  let kcp: KubeConfig;
  let skr: KubeConfig;
  let controller: Controller | undefined;
  let manager: Manager | undefined;
  let release: () => void = () => {};
  const namespace = `sync-targeted-${process.pid}`;
  const skrNamespace = `sync-targeted-skr-${process.pid}`;
  const kymaKey = `${namespace}/k`;
  /** Full reconciles of the test Kyma started, and whether they are held. */
  let passes = 0;
  let completed = 0;
  let held = false;
  let registry: ReturnType<typeof createRegistry>;

  before(async () => {
    const env = await sharedEnvironment();
    kcp = env.plane('kcp').kubeConfig();
    skr = env.plane('skr1').kubeConfig();
    await untilCrdsServe([kcp, skr]);
    const core = kcp.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    await skr.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: skrNamespace } } });
    await core.createNamespacedSecret({
      namespace,
      body: {
        metadata: { name: 'kubeconfig-k', namespace, labels: { [LABELS.kymaName]: 'k' } },
        data: {
          config: Buffer.from(await readFile(env.plane('skr1').kubeconfigPath, 'utf8')).toString('base64'),
        },
      },
    });
    await untilInWatchCache(
      () => core.listNamespacedSecret({ namespace, resourceVersion: '0' }),
      'kubeconfig-k',
    );
    await custom(kcp).createNamespacedCustomObject({
      ...refTo('kyma', namespace, ''),
      body: {
        apiVersion: `${GROUP}/${KINDS.kyma.version}`,
        kind: KINDS.kyma.kind,
        metadata: { name: 'k', namespace, labels: { [LABELS.runtimeId]: `runtime-${namespace}` } },
        // No modules, no catalog copy: the SKR is shared with other suites.
        spec: { channel: 'regular', modules: [], sync: { namespace: skrNamespace, moduleCatalog: false } },
      },
    });
    registry = createRegistry();
    const real = createManager({
      kcp,
      namespace,
      registry,
      requeue: QUIET_REQUEUE,
      syncResourcePolicy: { kinds: ['ConfigMap'], namespaces: [skrNamespace] },
    });
    manager = real;
    const gate = new Promise<void>((resolve) => (release = resolve));
    controller = createController({
      kcp,
      namespace,
      workers: 2,
      resyncMs: HOUR_MS,
      registry,
      reconciler: {
        // After the first pass, every full reconcile of the test Kyma waits until the test ends.
        reconcile: async (key) => {
          if (key === kymaKey) {
            passes += 1;
            if (held) await gate;
          }
          const result = await real.reconciler.reconcile(key);
          if (key === kymaKey) completed += 1;
          return result;
        },
      },
      // The targeted path as the agent routes it (work.ts).
      onSyncResourceChange: (key, name) => router.syncResourceChanged(key, name),
    });
    const router = createTargetedRouter({
      paths: real.targeted,
      fullPass: {
        now: (key, trigger) => controller?.enqueue(key, trigger),
        after: (key, ms) => controller?.queue.addAfter(key, ms),
      },
      logger: createLogger('test', 'silent'),
    });
    await controller.start();
    await eventually(
      'the first full pass wrote the Kyma status',
      async () => {
        const kyma = (await custom(kcp).getNamespacedCustomObject(refTo('kyma', namespace, 'k'))) as {
          status?: { state?: string };
        };
        return kyma.status?.state ? true : undefined;
      },
      ARRIVES_MS,
    );
    await controller.queue.whenIdle();
    held = true;
  });
  after(async () => {
    release();
    await controller?.stop();
    await manager?.close();
    await kcp
      ?.makeApiClient(CoreV1Api)
      .deleteNamespace({ name: namespace })
      .catch(() => {});
    await skr
      ?.makeApiClient(CoreV1Api)
      .deleteNamespace({ name: skrNamespace })
      .catch(() => {});
  });

  const configMapItem = (name: string, configMap: string, configNamespace: string, greeting: string) => ({
    name,
    strategy: 'CreateAndSync',
    resource: {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: configMap, namespace: configNamespace },
      data: { greeting },
    },
  });
  const syncRef = refTo('syncResource', namespace, 'manager-k');
  const greetingInSkr = async () =>
    (
      await getOrUndefined(() =>
        skr.makeApiClient(CoreV1Api).readNamespacedConfigMap({ name: 'rendered', namespace: skrNamespace }),
      )
    )?.data?.['greeting'];
  const syncStatus = async () =>
    (await custom(kcp).getNamespacedCustomObject(syncRef)) as {
      metadata: { generation: number };
      status?: { state?: string; observedGeneration?: number; items?: { name: string; state: string }[] };
    };

  it('applies a new SyncResource and then each edit of it while the Kyma pass is held, with its status and the allow-list', async () => {
    const passesBefore = passes;
    const completedBefore = completed;
    await custom(kcp).createNamespacedCustomObject({
      ...refTo('syncResource', namespace, ''),
      body: {
        apiVersion: `${GROUP}/${KINDS.syncResource.version}`,
        kind: KINDS.syncResource.kind,
        metadata: { name: 'manager-k', namespace },
        spec: { kyma: 'k', items: [configMapItem('config', 'rendered', skrNamespace, 'one')] },
      },
    });
    await eventually(
      'the new SyncResource applied in the SKR',
      async () => ((await greetingInSkr()) === 'one' ? true : undefined),
      ARRIVES_MS,
    );
    for (const greeting of ['two', 'three']) {
      await mergePatchCustomObject(custom(kcp), syncRef, {
        spec: { items: [configMapItem('config', 'rendered', skrNamespace, greeting)] },
      });
      await eventually(
        `the edit '${greeting}' applied in the SKR`,
        async () => ((await greetingInSkr()) === greeting ? true : undefined),
        ARRIVES_MS,
      );
    }
    const sync = await eventually(
      'the SyncResource status written for its generation',
      async () => {
        const read = await syncStatus();
        return read.status?.observedGeneration === read.metadata.generation ? read : undefined;
      },
      ARRIVES_MS,
    );
    expect(sync.status?.state).to.equal('Ready');
    // The changes do wake the full pass (the safety net, after its window), which is held: none of it ran.
    await eventually(
      'a full pass of the Kyma woken (and held)',
      async () => (passes > passesBefore ? true : undefined),
      ARRIVES_MS,
    );
    expect(completed - completedBefore, 'full passes finished').to.equal(0);
  });

  it('refuses an item outside the allow-list on the targeted path too', async () => {
    await mergePatchCustomObject(custom(kcp), syncRef, {
      spec: {
        items: [
          configMapItem('config', 'rendered', skrNamespace, 'four'),
          configMapItem('elsewhere', 'rendered', 'default', 'no'),
        ],
      },
    });
    const sync = await eventually(
      'the SyncResource status shows the refusal',
      async () => {
        const read = await syncStatus();
        return read.status?.observedGeneration === read.metadata.generation ? read : undefined;
      },
      ARRIVES_MS,
    );
    expect(sync.status?.items?.map((item) => [item.name, item.state])).to.deep.equal([
      ['config', 'Ready'],
      ['elsewhere', 'Error'],
    ]);
    expect(await greetingInSkr()).to.equal('four');
    const stray = await getOrUndefined(() =>
      skr.makeApiClient(CoreV1Api).readNamespacedConfigMap({ name: 'rendered', namespace: 'default' }),
    );
    expect(stray).to.equal(undefined);
  });

  it("wakes the Kyma's full pass only for a change of what its status says of the SyncResource (state, failed items)", async () => {
    /** Every time the Kyma key entered the work queue (a scheduled full pass counts once it is due). */
    const kymaAdds = async () =>
      (await registry.getSingleMetric('workqueue_adds_total')?.get())?.values.find(
        (value) => value.labels['name'] === 'kyma',
      )?.value ?? 0;
    const appliedFor = (greeting: string) =>
      eventually(
        `'${greeting}' applied and reported`,
        async () => {
          const read = await syncStatus();
          return read.status?.observedGeneration === read.metadata.generation &&
            (await greetingInSkr()) === greeting
            ? read
            : undefined;
        },
        ARRIVES_MS,
      );
    const window = () =>
      new Promise((resolve) => setTimeout(resolve, 3 * MODULE_MIRROR.fullReconcileAfterMirrorMs));
    // The refusal before changed the state: its full pass is due within the window.
    await window();
    const before = await kymaAdds();
    // A new greeting: the same item refused, the other applied: the Kyma's status would say the same.
    await mergePatchCustomObject(custom(kcp), syncRef, {
      spec: {
        items: [
          configMapItem('config', 'rendered', skrNamespace, 'five'),
          configMapItem('elsewhere', 'rendered', 'default', 'no'),
        ],
      },
    });
    expect((await appliedFor('five')).status?.state).to.equal('Error');
    // Three times the window after which a full pass would have been due.
    await window();
    expect(await kymaAdds(), 'full passes woken by an unchanged report').to.equal(before);

    // The refused item dropped: the state goes from Error to Ready, which the Kyma's status must show.
    await mergePatchCustomObject(custom(kcp), syncRef, {
      spec: { items: [configMapItem('config', 'rendered', skrNamespace, 'six')] },
    });
    expect((await appliedFor('six')).status?.state).to.equal('Ready');
    await eventually(
      'a full pass woken',
      async () => ((await kymaAdds()) > before ? true : undefined),
      ARRIVES_MS,
    );
  });
});
