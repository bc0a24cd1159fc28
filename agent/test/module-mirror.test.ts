// The targeted path of a callback (decision 010) on real planes: a KCP and an SKR of the shared environment, the
// real reconciler and controller, callbacks routed as the listener routes them. Each test has a KCP namespace and
// an SKR namespace of its own (spec.sync.namespace), so it shares nothing with other suites.
import { Writable } from 'node:stream';
import { readFile } from 'node:fs/promises';
import { expect } from 'chai';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import {
  DEFAULTS,
  GROUP,
  KINDS,
  LABELS,
  MODULE_MIRROR,
  type ChangeFingerprint,
  type Kyma,
} from '@skr-watcher/api';
import { applyCustomStatus, mergePatchCustomObject } from '@skr-watcher/kube';
import { sharedEnvironment } from '@skr-watcher/testenv';
import { createLogger, createRegistry, type Registry } from '@skr-watcher/telemetry';
import { createController, type Controller } from '../src/controller.js';
import type { AcceptedEvent } from '../src/listener/index.js';
import { moduleConfigName } from '../src/reconcile/index.js';
import { createManager, type Manager } from '../src/manager/index.js';
import { createTargetedRouter } from '../src/targeted/router.js';
import { ManualClock, settle } from '../../test/support/manual-clock.js';
import { custom, getOrUndefined, refTo, untilCrdsServe, untilInWatchCache } from './support/planes.js';

type Json = Record<string, unknown>;
type Meta = { uid: string; generation: number; resourceVersion: string };

/** Long enough that no requeue or resync falls within a test: only the callbacks explain a reconcile. */
const HOUR_MS = 3_600_000;
const QUIET_REQUEUE = { Ready: HOUR_MS, Processing: HOUR_MS, Warning: HOUR_MS, Error: HOUR_MS };

async function until<T>(what: string, check: () => Promise<T | undefined> | T | undefined): Promise<T> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Debug log lines of the reconciler, parsed, as they are written. */
class LogLines extends Writable {
  readonly lines: Json[] = [];
  override _write(chunk: Buffer, _encoding: string, done: () => void): void {
    for (const line of chunk.toString('utf8').split('\n'))
      if (line) this.lines.push(JSON.parse(line) as Json);
    done();
  }
}

describe('targeted Module CR mirror on a callback (real KCP and SKR)', function () {
  // Starting the shared planes on a loaded 2-core machine has taken over two minutes.
  this.timeout(300_000);
  let kcp: KubeConfig;
  let skr: KubeConfig;
  let skrKubeconfig: string;
  let counter = 0;

  before(async () => {
    const env = await sharedEnvironment();
    kcp = env.plane('kcp').kubeConfig();
    skr = env.plane('skr1').kubeConfig();
    skrKubeconfig = await readFile(env.plane('skr1').kubeconfigPath, 'utf8');
    await untilCrdsServe([kcp, skr]);
  });

  /** A KCP namespace with the sample module's catalog, a Kyma using it, its kubeconfig Secret and SKR namespace. */
  async function world(): Promise<{ namespace: string; skrNamespace: string; kymaKey: string }> {
    counter += 1;
    const namespace = `mirror-${process.pid}-${counter}`;
    const skrNamespace = `mirror-skr-${process.pid}-${counter}`;
    const api = custom(kcp);
    await kcp.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
    await skr.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: skrNamespace } } });
    const create = (kind: keyof typeof KINDS, body: Json) =>
      api.createNamespacedCustomObject({
        ...refTo(kind, namespace, ''),
        body: { apiVersion: `${GROUP}/${KINDS[kind].version}`, kind: KINDS[kind].kind, ...body },
      });
    await create('moduleReleaseMeta', {
      metadata: { name: 'sample', namespace },
      spec: { moduleName: 'sample', channels: [{ channel: 'regular', version: '1.0.0' }] },
    });
    await create('moduleTemplate', {
      metadata: { name: 'sample-1.0.0', namespace },
      spec: {
        moduleName: 'sample',
        version: '1.0.0',
        data: {
          apiVersion: `${GROUP}/${KINDS.sample.version}`,
          kind: KINDS.sample.kind,
          metadata: { name: 'sample', namespace: skrNamespace },
          spec: { greeting: 'hello' },
        },
      },
    });
    const core = kcp.makeApiClient(CoreV1Api);
    await core.createNamespacedSecret({
      namespace,
      body: {
        metadata: { name: 'kubeconfig-k', namespace, labels: { [LABELS.kymaName]: 'k' } },
        data: { config: Buffer.from(skrKubeconfig).toString('base64') },
      },
    });
    await untilInWatchCache(
      () => core.listNamespacedSecret({ namespace, resourceVersion: '0' }),
      'kubeconfig-k',
    );
    await create('kyma', {
      metadata: { name: 'k', namespace, labels: { [LABELS.runtimeId]: `runtime-${namespace}` } },
      // The module catalog is not copied: the SKR is shared with other suites.
      spec: {
        channel: 'regular',
        modules: [{ name: 'sample' }],
        sync: { namespace: skrNamespace, moduleCatalog: false },
      },
    });
    return { namespace, skrNamespace, kymaKey: `${namespace}/k` };
  }

  const sampleIn = (skrNamespace: string) => refTo('sample', skrNamespace, 'sample');
  const readSample = async (skrNamespace: string) =>
    (await custom(skr).getNamespacedCustomObject(sampleIn(skrNamespace))) as { metadata: Meta };
  const editSample = async (skrNamespace: string, greeting: string) =>
    (await mergePatchCustomObject(custom(skr), sampleIn(skrNamespace), { spec: { greeting } })) as {
      metadata: Meta;
    };
  /** What a module's operator reports on its Module CR: the state the Kyma's status takes from it. */
  const reportSampleState = (skrNamespace: string, state: string) =>
    applyCustomStatus(
      custom(skr),
      sampleIn(skrNamespace),
      {
        apiVersion: `${GROUP}/${KINDS.sample.version}`,
        kind: KINDS.sample.kind,
        metadata: { name: 'sample', namespace: skrNamespace },
        status: { state },
      },
      { fieldManager: 'sample-operator', force: true },
    );
  const mirroredGreeting = async (namespace: string): Promise<unknown> => {
    const config = (await getOrUndefined(() =>
      custom(kcp).getNamespacedCustomObject(
        refTo('moduleConfig', namespace, moduleConfigName('k', 'sample')),
      ),
    )) as { spec?: { resource?: { spec?: { greeting?: unknown } } } } | undefined;
    return config?.spec?.resource?.spec?.greeting;
  };
  /** The callback the webhook sends for an UPDATE, with the fingerprint it takes from the AdmissionReview. */
  const callbackFor = (
    namespace: string,
    skrNamespace: string,
    fingerprint: ChangeFingerprint,
  ): AcceptedEvent => ({
    runtimeId: `runtime-${namespace}`,
    kyma: { namespace, name: 'k' },
    component: 'lifecycle-manager',
    contract: 'v2',
    watched: { namespace: skrNamespace, name: 'sample' },
    gvk: { group: GROUP, version: KINDS.sample.version, kind: KINDS.sample.kind },
    fingerprint,
    receivedAt: new Date(),
  });
  const counterValue = async (registry: Registry, name: string, labels: Record<string, string>) => {
    const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
    const values = (metric?.values ?? []) as { value: number; labels: Record<string, unknown> }[];
    return values
      .filter((v) => Object.entries(labels).every(([key, value]) => v.labels[key] === value))
      .reduce((sum, v) => sum + v.value, 0);
  };
  /** KCP GETs of Kymas the reconciler sent. */
  const kcpKymaGets = (registry: Registry) =>
    counterValue(registry, 'skr_agent_kube_requests_total', {
      cluster: 'kcp',
      verb: 'get',
      resource: 'kymas',
    });

  /** The agent as it runs: reconciler and controller on the test's own world, callbacks routed as the listener does. */
  async function runningAgent(clock?: ManualClock) {
    const names = await world();
    const registry = createRegistry();
    /** Per full reconcile: the greeting the test Kyma's ModuleConfig showed when the pass started. */
    const passes: { key: string; mirroredAtStart: unknown }[] = [];
    const manager = createManager({
      kcp,
      namespace: names.namespace,
      registry,
      requeue: QUIET_REQUEUE,
      // As the agent runs it: the ModuleConfig the cached Kyma names is read alongside the Kyma read, and the Kyma
      // comes from the watch cache at the version the reconciler last read or wrote.
      cachedKyma: (key) => controller.cachedKyma(key),
      caches: {
        moduleTemplates: () => controller.caches.moduleTemplates(),
        moduleReleaseMetas: () => controller.caches.moduleReleaseMetas(),
        watchers: () => controller.caches.watchers(),
        moduleConfigs: (kyma) => controller.caches.moduleConfigs(kyma),
        kyma: (key) => controller.caches.kyma?.(key),
      },
    });
    const controller = createController({
      kcp,
      namespace: names.namespace,
      workers: 2,
      resyncMs: HOUR_MS,
      registry,
      ...(clock ? { clock } : {}),
      reconciler: {
        reconcile: async (key) => {
          passes.push({
            key,
            mirroredAtStart: key === names.kymaKey ? await mirroredGreeting(names.namespace) : undefined,
          });
          return manager.reconciler.reconcile(key);
        },
      },
    });
    // Callbacks routed as the agent routes them (work.ts), without the pacing of its listener wakes.
    const router = createTargetedRouter({
      paths: manager.targeted,
      fullPass: {
        now: (key) => controller.enqueue(key),
        after: (key, ms) => controller.queue.addAfter(key, ms),
      },
      logger: createLogger('test', 'silent'),
    });
    await controller.start();
    // The first pass creates the Module CR in the SKR and its ModuleConfig.
    await until('the first pass mirrored the Module CR', async () =>
      (await mirroredGreeting(names.namespace)) === 'hello' ? true : undefined,
    );
    await controller.queue.whenIdle();
    /** Edits the Module CR in the SKR and routes the callback its webhook sends, as the listener does. */
    const editAndCallBack = async (greeting: string): Promise<void> => {
      const before = await readSample(names.skrNamespace);
      const edited = await editSample(names.skrNamespace, greeting);
      router.callback(
        names.kymaKey,
        callbackFor(names.namespace, names.skrNamespace, {
          uid: edited.metadata.uid,
          generation: edited.metadata.generation,
          previousResourceVersion: before.metadata.resourceVersion,
        }),
      );
    };
    const stop = async () => {
      await controller.stop();
      await manager.close();
    };
    return { names, registry, manager, controller, passes, editAndCallBack, stop };
  }

  describe('with the controller running', () => {
    let agent: Awaited<ReturnType<typeof runningAgent>>;
    let registry: Registry;
    let controller: Controller;
    let names: Awaited<ReturnType<typeof world>>;
    let passes: Awaited<ReturnType<typeof runningAgent>>['passes'];
    let editAndCallBack: (greeting: string) => Promise<void>;

    before(async () => {
      agent = await runningAgent();
      ({ registry, controller, names, passes, editAndCallBack } = agent);
    });

    after(async () => agent?.stop());

    it('mirrors a Module CR edit into its ModuleConfig before the Kyma’s full reconcile starts', async () => {
      const from = passes.length;
      // The module's operator reports Warning: the Kyma's status (Ready) does not show it, so a full pass follows.
      await reportSampleState(names.skrNamespace, 'Warning');
      await editAndCallBack('targeted');
      const pass = await until('the full reconcile after the callback', () =>
        passes.slice(from).find((p) => p.key === names.kymaKey),
      );
      // The targeted mirror is in KCP before the full pass even began.
      expect(pass.mirroredAtStart).to.equal('targeted');
      expect(
        await counterValue(registry, 'skr_agent_module_mirrors_total', { outcome: 'mirrored' }),
      ).to.equal(1);
    });

    it('costs no full reconcile for edits whose Module CR state the Kyma’s status shows: the agent’s own ModuleConfig writes wake nothing', async () => {
      // The pass of the test before wrote the Module CR's Warning into the Kyma's status.
      await until('the Kyma status shows the Module CR state', async () => {
        const kyma = (await custom(kcp).getNamespacedCustomObject(refTo('kyma', names.namespace, 'k'))) as {
          status?: { modules?: { name: string; state: string }[] };
        };
        return kyma.status?.modules?.find((module) => module.name === 'sample')?.state === 'Warning'
          ? true
          : undefined;
      });
      await controller.queue.whenIdle();
      // The pass's own status write is in the watch cache: from here a mirror reads no Kyma from the KCP.
      const written = (
        (await custom(kcp).getNamespacedCustomObject(refTo('kyma', names.namespace, 'k'))) as Kyma
      ).metadata?.resourceVersion;
      await until('the watch cache holds the Kyma the pass wrote', () =>
        controller.cachedKyma(names.kymaKey)?.metadata?.resourceVersion === written ? true : undefined,
      );
      const kymaGetsBefore = await kcpKymaGets(registry);
      const from = passes.length;
      const ownWakeUpsBefore = await counterValue(registry, 'skr_agent_triggers_total', {
        source: 'moduleconfig',
      });
      const mirroredBefore = await counterValue(registry, 'skr_agent_module_mirrors_total', {
        outcome: 'mirrored',
      });
      const edits = 3;
      for (let i = 0; i < edits; i++) {
        await editAndCallBack(`edit-${i}`);
        await until(`edit ${i} mirrored`, async () =>
          (await mirroredGreeting(names.namespace)) === `edit-${i}` ? true : undefined,
        );
      }
      await until('every targeted mirror counted', async () =>
        (await counterValue(registry, 'skr_agent_module_mirrors_total', { outcome: 'mirrored' })) -
          mirroredBefore ===
        edits
          ? true
          : undefined,
      );
      // Past the window in which a full pass would follow a mirror.
      await new Promise((resolve) => setTimeout(resolve, 3 * MODULE_MIRROR.fullReconcileAfterMirrorMs));
      await controller.queue.whenIdle();
      // Before the barrier's pass (its Kyma does not exist: that pass reads it).
      const kymaGets = (await kcpKymaGets(registry)) - kymaGetsBefore;
      // A ModuleConfig edited by hand is the barrier: the watch delivers events in order, so once its wake-up is
      // seen, the events of every earlier ModuleConfig write have been handled too.
      const barrier = moduleConfigName('barrier', 'sample');
      await custom(kcp).createNamespacedCustomObject({
        ...refTo('moduleConfig', names.namespace, ''),
        body: {
          apiVersion: `${GROUP}/${KINDS.moduleConfig.version}`,
          kind: KINDS.moduleConfig.kind,
          metadata: { name: barrier, namespace: names.namespace, labels: { [LABELS.kymaName]: 'barrier' } },
          spec: {
            kyma: 'barrier',
            module: 'sample',
            resource: { apiVersion: 'v1', kind: 'X', metadata: { name: 'x' } },
          },
        },
      });
      await mergePatchCustomObject(custom(kcp), refTo('moduleConfig', names.namespace, barrier), {
        spec: { resource: { apiVersion: 'v1', kind: 'X', metadata: { name: 'y' } } },
      });
      await until('the hand edit of the barrier ModuleConfig woke its Kyma', () =>
        passes.slice(from).some((p) => p.key === `${names.namespace}/barrier`) ? true : undefined,
      );
      await controller.queue.whenIdle();
      const ownWakeUps =
        (await counterValue(registry, 'skr_agent_triggers_total', { source: 'moduleconfig' })) -
        ownWakeUpsBefore -
        1;
      expect({
        reconciles: passes.slice(from).filter((p) => p.key === names.kymaKey).length,
        ownWakeUps,
        kymaGets,
      }).to.deep.equal({ reconciles: 0, ownWakeUps: 0, kymaGets: 0 });
    });
  });

  describe('a burst of Module CR edits (the work queue on a clock the test moves)', () => {
    const clock = new ManualClock();
    let agent: Awaited<ReturnType<typeof runningAgent>>;

    before(async () => {
      agent = await runningAgent(clock);
    });

    after(async () => agent?.stop());

    /** Five edits, each mirrored at once; the passes of the Kyma during the burst and after the window. */
    async function burst(label: string): Promise<{ during: number; after: number }> {
      const { names, passes, registry, controller, editAndCallBack } = agent;
      const from = passes.length;
      const mirroredBefore = await counterValue(registry, 'skr_agent_module_mirrors_total', {
        outcome: 'mirrored',
      });
      const edits = 5;
      for (let i = 0; i < edits; i++) {
        await editAndCallBack(`${label}-${i}`);
        await until(`${label} edit ${i} mirrored`, async () =>
          (await mirroredGreeting(names.namespace)) === `${label}-${i}` ? true : undefined,
        );
      }
      await until('every targeted mirror counted', async () =>
        (await counterValue(registry, 'skr_agent_module_mirrors_total', { outcome: 'mirrored' })) -
          mirroredBefore ===
        edits
          ? true
          : undefined,
      );
      // Each callback's follow-up has been routed (it runs right after its mirror resolves), and nothing ran.
      await settle();
      await controller.queue.whenIdle();
      const during = passes.slice(from).filter((p) => p.key === names.kymaKey).length;
      await clock.advance(MODULE_MIRROR.fullReconcileAfterMirrorMs);
      await settle();
      await controller.queue.whenIdle();
      return { during, after: passes.slice(from).filter((p) => p.key === names.kymaKey).length - during };
    }

    it('mirrors each edit at once and runs one full reconcile for the whole burst, after the window, when the Kyma’s status does not show the Module CR’s state', async () => {
      await reportSampleState(agent.names.skrNamespace, 'Error');
      expect(await burst('burst')).to.deep.equal({ during: 0, after: 1 });
    });

    it('runs no full reconcile for a burst whose Module CR state the Kyma’s status shows', async () => {
      expect(await burst('shown')).to.deep.equal({ during: 0, after: 0 });
    });
  });

  describe('without the controller (the reconciler alone)', () => {
    let manager: Manager;
    let names: Awaited<ReturnType<typeof world>>;
    const log = new LogLines();

    before(async () => {
      names = await world();
      manager = createManager({
        kcp,
        namespace: names.namespace,
        requeue: QUIET_REQUEUE,
        logger: createLogger('test', 'debug', log),
        // A stale cache that names another module for the Module CR: the fresh Kyma read decides.
        cachedKyma: () => ({
          apiVersion: `${GROUP}/${KINDS.kyma.version}`,
          kind: KINDS.kyma.kind,
          metadata: { name: 'k', namespace: names.namespace },
          spec: { channel: 'regular' },
          status: {
            state: 'Ready',
            modules: [
              {
                name: 'renamed',
                state: 'Ready',
                resource: {
                  apiVersion: `${GROUP}/${KINDS.sample.version}`,
                  kind: KINDS.sample.kind,
                  metadata: { name: 'sample', namespace: names.skrNamespace },
                },
              },
            ],
          },
        }),
      });
      await manager.reconciler.reconcile(names.kymaKey);
    });

    after(async () => manager?.close());

    it('waits for a write announced before it is stored, re-reading until the SKR shows it', async () => {
      // What validating admission sees: the next generation, while the stored object is still the old one.
      const stored = await readSample(names.skrNamespace);
      const mirror = manager.targeted.objectChanged(names.kymaKey, {
        gvk: { group: GROUP, version: KINDS.sample.version, kind: KINDS.sample.kind },
        namespace: names.skrNamespace,
        name: 'sample',
        fingerprint: {
          uid: stored.metadata.uid,
          generation: stored.metadata.generation + 1,
          previousResourceVersion: stored.metadata.resourceVersion,
        },
      });
      await until('the agent read the Module CR before the write was stored', () =>
        log.lines.some(
          (line) => line['msg'] === 'SKR object does not show the announced write yet; reading it again',
        )
          ? true
          : undefined,
      );
      await editSample(names.skrNamespace, 'stored late');
      const result = await mirror;
      expect(result.outcome).to.equal('mirrored');
      expect(result.reads).to.be.greaterThan(1);
      expect(await mirroredGreeting(names.namespace)).to.equal('stored late');
    });

    it('mirrors on the callback alone: no full reconcile runs', async () => {
      const before = await readSample(names.skrNamespace);
      const edited = await editSample(names.skrNamespace, 'callback only');
      const result = await manager.targeted.objectChanged(names.kymaKey, {
        gvk: { group: GROUP, version: KINDS.sample.version, kind: KINDS.sample.kind },
        namespace: names.skrNamespace,
        name: 'sample',
        fingerprint: {
          uid: edited.metadata.uid,
          generation: edited.metadata.generation,
          previousResourceVersion: before.metadata.resourceVersion,
        },
      });
      // The reconcile in before() wrote the Module CR's state (Ready) into the Kyma's status: no pass needs to follow.
      expect(result).to.deep.equal({
        path: 'mirror',
        outcome: 'mirrored',
        reads: 1,
        kymaStatusChanged: false,
      });
      expect(await mirroredGreeting(names.namespace)).to.equal('callback only');
    });
  });

  describe('alongside a full reconcile (the reconciler alone)', () => {
    let manager: Manager;
    let names: Awaited<ReturnType<typeof world>>;
    /** While set, a full reconcile waits in its SyncResources step (after its modules) until it is opened. */
    let hold: { reached: () => void; opened: Promise<void> } | undefined;

    before(async () => {
      names = await world();
      manager = createManager({
        kcp,
        namespace: names.namespace,
        requeue: QUIET_REQUEUE,
        syncResourceNames: async () => {
          if (hold) {
            hold.reached();
            await hold.opened;
          }
          return [];
        },
      });
      await manager.reconciler.reconcile(names.kymaKey);
    });

    after(async () => manager?.close());

    const changeOf = (edited: { metadata: Meta }, before: { metadata: Meta }) => ({
      gvk: { group: GROUP, version: KINDS.sample.version, kind: KINDS.sample.kind },
      namespace: names.skrNamespace,
      name: 'sample',
      fingerprint: {
        uid: edited.metadata.uid,
        generation: edited.metadata.generation,
        previousResourceVersion: before.metadata.resourceVersion,
      },
    });

    it('mirrors an edit while a full reconcile of the same Kyma is still running', async () => {
      let reached: () => void = () => {};
      const inPass = new Promise<void>((resolve) => (reached = resolve));
      let open: () => void = () => {};
      hold = { reached, opened: new Promise<void>((resolve) => (open = resolve)) };
      let passDone = false;
      const pass = manager.reconciler.reconcile(names.kymaKey).finally(() => (passDone = true));
      try {
        await inPass;
        const before = await readSample(names.skrNamespace);
        const edited = await editSample(names.skrNamespace, 'during a full reconcile');
        const result = await Promise.race([
          manager.targeted.objectChanged(names.kymaKey, changeOf(edited, before)),
          until<never>('the targeted mirror (it waited for the full reconcile)', () => undefined),
        ]);
        // Mirrored by the targeted path, or by the pass's own mirror step if that read the edit first: either way
        // while the pass is still running.
        expect(passDone).to.equal(false);
        expect(result.outcome).to.be.oneOf(['mirrored', 'unchanged']);
        expect(await mirroredGreeting(names.namespace)).to.equal('during a full reconcile');
      } finally {
        hold = undefined;
        open();
        await pass;
      }
    });

    it('does not write back the ModuleConfig of a module the user took over (managed: false)', async () => {
      const skrKyma = refTo('kyma', names.skrNamespace, DEFAULTS.skrKymaName);
      await mergePatchCustomObject(custom(skr), skrKyma, {
        spec: { modules: [{ name: 'sample', managed: false }] },
      });
      await manager.reconciler.reconcile(names.kymaKey);
      expect(await mirroredGreeting(names.namespace)).to.equal(undefined);
      const before = await readSample(names.skrNamespace);
      const edited = await editSample(names.skrNamespace, 'the user runs it');
      const result = await manager.targeted.objectChanged(names.kymaKey, changeOf(edited, before));
      expect(result.outcome).to.equal('not-a-module');
      expect(await mirroredGreeting(names.namespace)).to.equal(undefined);
    });
  });
});
