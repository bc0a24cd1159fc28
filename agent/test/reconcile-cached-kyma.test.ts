// The KCP Kyma from the controller's watch cache (decision 016), on a real KCP and SKR: a no-op pass run
// by the controller sends no KCP `get kymas`; a cached copy older than the reconciler's own last write of the Kyma
// (the watch has not delivered it yet) is not used, so a status computed from it cannot skip a needed write; a Kyma
// the cache does not hold (yet), or holds from before another replica had it, is read from the API server.
import { readFile } from 'node:fs/promises';
import { expect } from 'chai';
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import { DEFAULTS, GROUP, KINDS, LABELS } from '@skr-watcher/api';
import { pooledKubeConfig } from '@skr-watcher/kube';
import { createRegistry, silentLogger, type Registry } from '@skr-watcher/telemetry';
import type { Environment } from '@skr-watcher/testenv';
import { waitUntil } from '../../test/support/eventually.js';
import { kubeConfigAsAgent } from '../../test/support/kcp-rbac.js';
import { seedKcp } from '../../test/support/kcp-seed.js';
import { agentConfigFromFlags } from '../src/config.js';
import { testRunFlags } from './support/run-flags.js';
import { createEventStream } from '../src/event-stream.js';
import { type WatchCaches } from '../src/reconcile/index.js';
import { createManager, type Manager } from '../src/manager/index.js';
import { startWork } from '../src/work.js';
import { kcpAndSkrForSuite, kymaRef, untilInWatchCache } from './support/planes.js';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

type Json = Record<string, unknown>;
interface KymaJson {
  metadata: { resourceVersion: string };
  spec: Json;
  status?: { state?: string; activeChannel?: string };
}

describe('the KCP Kyma from the watch cache (real KCP and SKR)', function () {
  this.timeout(180_000);
  const planes = kcpAndSkrForSuite();
  const { cleanups } = planes;
  let env: Environment;
  let kcp: KubeConfig;
  let skr: KubeConfig;
  let kcpApi: CustomObjectsApi;
  let round = 0;

  before(() => {
    ({ env, kcp, skr } = planes);
    kcpApi = kcp.makeApiClient(CustomObjectsApi);
  });

  /**
   * A KCP namespace with the sample catalog and one Kyma on the SKR, without modules or channel; its SKR Kyma lives
   * in a namespace of its own, so the tests share the SKR without touching each other's objects.
   */
  async function kymaOnSkr(): Promise<{
    namespace: string;
    name: string;
    key: string;
    skrNamespace: string;
  }> {
    round += 1;
    const namespace = `cached-${process.pid}-${round}`;
    const name = `kyma-${round}`;
    const skrNamespace = `cached-skr-${round}`;
    await seedKcp(env, namespace, []);
    await kcp.makeApiClient(CoreV1Api).createNamespacedSecret({
      namespace,
      body: {
        metadata: { name: `kubeconfig-${name}`, namespace, labels: { [LABELS.kymaName]: name } },
        stringData: { config: await readFile(env.plane('skr1').kubeconfigPath, 'utf8') },
      },
    });
    await untilInWatchCache(
      () => kcp.makeApiClient(CoreV1Api).listNamespacedSecret({ namespace, resourceVersion: '0' }),
      `kubeconfig-${name}`,
    );
    await kcpApi.createNamespacedCustomObject({
      ...kymaRef(namespace, name),
      body: {
        apiVersion: `${GROUP}/${KINDS.kyma.version}`,
        kind: KINDS.kyma.kind,
        metadata: { name, namespace, labels: { [LABELS.runtimeId]: name } },
        spec: { modules: [], sync: { namespace: skrNamespace } },
      },
    });
    return { namespace, name, key: `${namespace}/${name}`, skrNamespace };
  }

  const readKyma = async (namespace: string, name: string) =>
    (await kcpApi.getNamespacedCustomObject(kymaRef(namespace, name))) as KymaJson;

  /** The user sets the SKR Kyma's modules (its spec is theirs once created). */
  const setSkrModules = (skrNamespace: string, modules: Json[]) =>
    skr
      .makeApiClient(CustomObjectsApi)
      .patchNamespacedCustomObject(
        { ...kymaRef(skrNamespace, DEFAULTS.skrKymaName), body: { spec: { modules } } },
        mergePatch,
      );

  /** KCP requests the reconciler sent, by verb and resource ("get kymas"). */
  async function kcpRequests(registry: Registry): Promise<Map<string, number>> {
    const values = (await registry.getSingleMetric('skr_agent_kube_requests_total')?.get())?.values ?? [];
    const counts = new Map<string, number>();
    for (const v of values) {
      if (v.labels['cluster'] !== 'kcp') continue;
      const what = `${String(v.labels['verb'])} ${String(v.labels['resource'])}`;
      counts.set(what, (counts.get(what) ?? 0) + v.value);
    }
    return counts;
  }
  const kymaGets = async (registry: Registry) => (await kcpRequests(registry)).get('get kymas') ?? 0;

  /** A reconciler as work.ts builds one, whose Kyma cache is what the test holds (a watch a step behind, or none). */
  async function reconcilerWithCache(namespace: string, held: { kyma?: unknown }) {
    const registry = createRegistry();
    const caches: WatchCaches = {
      moduleTemplates: () => undefined,
      moduleReleaseMetas: () => undefined,
      watchers: () => undefined,
      moduleConfigs: () => undefined,
      kyma: () => held.kyma,
    };
    const manager = createManager({
      kcp: await kubeConfigAsAgent(kcp, namespace),
      namespace,
      registry,
      skrTimeoutMs: 5_000,
      caches,
    });
    cleanups.push(() => manager.close());
    return { manager, registry };
  }

  /** The agent's work as `skr-agent run` starts it, for `namespace`; `passes` counts its reconciles so far. */
  async function agentWork(namespace: string) {
    const agentKcp = await kubeConfigAsAgent(kcp, namespace);
    // Passes every half second once Ready, so a few no-op passes take a moment.
    const config = agentConfigFromFlags(testRunFlags(namespace));
    const registry = createRegistry();
    const pool = await pooledKubeConfig(agentKcp);
    const events = createEventStream();
    const work = await startWork(config, agentKcp, silentLogger(), registry, events, pool);
    cleanups.push(async () => {
      await work.stop();
      await events.close();
      await pool.close();
    });
    const passes = async () =>
      ((await registry.getSingleMetric('skr_agent_reconcile_total')?.get())?.values ?? []).reduce(
        (sum, v) => sum + v.value,
        0,
      );
    return { registry, passes };
  }

  it('sends no KCP get of the Kyma on a no-op pass run by the controller, and still applies a KCP Kyma edit', async function () {
    const { namespace, name, key } = await kymaOnSkr();
    const { registry, passes } = await agentWork(namespace);

    await waitUntil(`${key} Ready`, async () => (await readKyma(namespace, name)).status?.state === 'Ready');
    // Its last status write reaches the watch within a pass or two; from then on a pass changes nothing.
    await waitUntil('two more passes', async () => (await passes()) >= 4, 30_000, 50);
    const before = { gets: await kymaGets(registry), passes: await passes() };
    await waitUntil('three no-op passes', async () => (await passes()) >= before.passes + 3, 30_000, 50);
    const after = { gets: await kymaGets(registry), passes: await passes() };
    expect(after.gets - before.gets, `KCP Kyma GETs over ${after.passes - before.passes} passes`).to.equal(0);
    expect((await readKyma(namespace, name)).status?.state).to.equal('Ready');

    // An edit of the KCP Kyma wakes a pass once the watch holds it; that pass applies it (the SKR Kyma has no
    // channel, so the KCP Kyma's decides the active one).
    await kcpApi.patchNamespacedCustomObject(
      { ...kymaRef(namespace, name), body: { spec: { channel: 'fast' } } },
      mergePatch,
    );
    await waitUntil(
      'activeChannel fast',
      async () => (await readKyma(namespace, name)).status?.activeChannel === 'fast',
    );
  });

  it('resolves modules from the watched catalog: a no-op pass with a module sends no KCP get of its ModuleTemplate or ModuleReleaseMeta', async function () {
    const { namespace, name, key, skrNamespace } = await kymaOnSkr();
    const { registry, passes } = await agentWork(namespace);
    const catalogGets = async () => {
      const counts = await kcpRequests(registry);
      return (counts.get('get moduletemplates') ?? 0) + (counts.get('get modulereleasemetas') ?? 0);
    };
    await waitUntil(`${key} Ready`, async () => (await readKyma(namespace, name)).status?.state === 'Ready');
    await setSkrModules(skrNamespace, [{ name: 'sample' }]);
    const resolved = async () => {
      const status = (await readKyma(namespace, name)).status as { modules?: Json[] } | undefined;
      return status?.modules?.find((module) => module['name'] === 'sample');
    };
    // Resolved from the cached template: the sample release's version, not a TemplateNotFound or a parse failure.
    await waitUntil('sample resolved', async () => (await resolved())?.['version'] === '1.0.0', 60_000);
    const before = { gets: await catalogGets(), passes: await passes() };
    await waitUntil('three more passes', async () => (await passes()) >= before.passes + 3, 30_000, 50);
    const after = { gets: await catalogGets(), passes: await passes() };
    expect(after.gets - before.gets, `catalog GETs over ${after.passes - before.passes} passes`).to.equal(0);
  });

  it('reads the Kyma fresh when the cached copy is older than its own last status write, so the status is corrected', async function () {
    const { namespace, name, key, skrNamespace } = await kymaOnSkr();
    const held: { kyma?: unknown } = {};
    const { manager, registry } = await reconcilerWithCache(namespace, held);
    await manager.reconciler.reconcile(key);
    // The watch holds the Kyma as the first pass left it: Ready.
    held.kyma = await readKyma(namespace, name);
    expect((held.kyma as KymaJson).status?.state).to.equal('Ready');

    // The user enables a module that does not exist: the pass (from the cache, which is current) writes Error.
    await setSkrModules(skrNamespace, [{ name: 'no-such-module' }]);
    const gets = await kymaGets(registry);
    await manager.reconciler.reconcile(key);
    expect(await kymaGets(registry), 'a pass from a current cache').to.equal(gets);
    expect((await readKyma(namespace, name)).status?.state).to.equal('Error');

    // The user takes it back before the watch delivered the Error write: the cache still shows Ready. A pass that
    // believed it would find Ready unchanged and leave Error standing (the next look: the Ready requeue, minutes).
    await setSkrModules(skrNamespace, []);
    await manager.reconciler.reconcile(key);
    expect((await readKyma(namespace, name)).status?.state).to.equal('Ready');
    expect(await kymaGets(registry), 'the stale copy is not used').to.equal(gets + 1);
  });

  it('reads a Kyma acquired by this replica from the API server: not cached yet, or cached from before a peer had it', async function () {
    const { namespace, name, key, skrNamespace } = await kymaOnSkr();
    const held: { kyma?: unknown } = {};
    const { manager, registry } = await reconcilerWithCache(namespace, held);
    // Acquired, and the watch has not delivered it yet.
    manager.acquired(key);
    await manager.reconciler.reconcile(key);
    expect(await kymaGets(registry)).to.equal(1);
    expect((await readKyma(namespace, name)).status?.state).to.equal('Ready');
    held.kyma = await readKyma(namespace, name);

    // Handed to a peer, which reconciles it after the user enabled a missing module (Error), then handed back;
    // this replica's watch still holds the copy from before the handover.
    await setSkrModules(skrNamespace, [{ name: 'no-such-module' }]);
    const peer: Manager = createManager({
      kcp: await kubeConfigAsAgent(kcp, namespace),
      namespace,
      skrTimeoutMs: 5_000,
    });
    cleanups.push(() => peer.close());
    await peer.reconciler.reconcile(key);
    expect((await readKyma(namespace, name)).status?.state).to.equal('Error');
    await setSkrModules(skrNamespace, []);

    manager.acquired(key);
    await manager.reconciler.reconcile(key);
    expect((await readKyma(namespace, name)).status?.state).to.equal('Ready');
    expect(await kymaGets(registry)).to.equal(2);
  });
});
