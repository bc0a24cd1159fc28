// The module manager kit on a real KCP API server: ModuleConfigs as the agent writes them, the SyncResources the
// kit writes, and the status the lifecycle manager would report on them (written here through the API server, with
// the agent's field manager, as skr-agent writes it; test/integration/module-manager.test.ts runs the real agent).
import { createConnection, createServer, type AddressInfo, type Socket } from 'node:net';
import { expect } from 'chai';
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { FIELD_MANAGER, GROUP, KINDS, LABELS, type Clock, type ModuleConfig } from '@skr-watcher/api';
import { applyCustomObject, applyCustomStatus } from '@skr-watcher/kube';
import { createRegistry, type Registry } from '@skr-watcher/telemetry';
import { sharedEnvironment } from '@skr-watcher/testenv';
import { eventually } from '../../../test/support/eventually.js';
import { ManualClock } from '../../../test/support/manual-clock.js';
import {
  PENDING_AFTER_MS,
  createModuleManager,
  syncResourceNameOf,
  type ModuleManager,
  type Rendered,
  type RenderFunction,
} from '../src/index.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let kcp: KubeConfig;
let custom: CustomObjectsApi;
let counter = 0;
const running: ModuleManager[] = [];

const ref = (kind: 'moduleConfig' | 'syncResource', namespace: string, name: string) => ({
  group: GROUP,
  version: KINDS[kind].version,
  plural: KINDS[kind].plural,
  namespace,
  name,
});

async function freshNamespace(): Promise<string> {
  counter += 1;
  const namespace = `mm-${process.pid}-${counter}`;
  await kcp.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
  return namespace;
}

/** A ModuleConfig as skr-agent writes it (spec by server-side apply, then its status). */
async function mirror(namespace: string, name: string, module: string, spec: Json): Promise<void> {
  await applyCustomObject(
    custom,
    ref('moduleConfig', namespace, name),
    {
      apiVersion: `${GROUP}/${KINDS.moduleConfig.version}`,
      kind: KINDS.moduleConfig.kind,
      metadata: { name, namespace, labels: { [LABELS.moduleName]: module, [LABELS.kymaName]: 'kyma-a' } },
      spec: {
        kyma: 'kyma-a',
        module,
        resource: {
          apiVersion: `${GROUP}/${KINDS.sample.version}`,
          kind: 'Sample',
          metadata: { name: 'sample', namespace: 'kyma-system' },
          spec,
        },
      },
    },
    { fieldManager: FIELD_MANAGER, force: true },
  );
  await applyCustomStatus(
    custom,
    ref('moduleConfig', namespace, name),
    {
      apiVersion: `${GROUP}/${KINDS.moduleConfig.version}`,
      kind: KINDS.moduleConfig.kind,
      metadata: { name, namespace },
      status: { state: 'Ready', sourceResourceVersion: String(Date.now()) },
    },
    { fieldManager: FIELD_MANAGER, force: true },
  );
}

/** What skr-agent reports after applying a SyncResource: one status per item. */
async function reportApplied(namespace: string, name: string, failing: Record<string, string> = {}) {
  const sync = (await custom.getNamespacedCustomObject(ref('syncResource', namespace, name))) as Json;
  const items = (sync['spec'].items as Json[]).map((item) =>
    failing[item['name']]
      ? { name: item['name'], state: 'Error', message: failing[item['name']] }
      : { name: item['name'], state: 'Ready', message: `applied ${item['resource'].kind}` },
  );
  await applyCustomStatus(
    custom,
    ref('syncResource', namespace, name),
    {
      apiVersion: `${GROUP}/${KINDS.syncResource.version}`,
      kind: KINDS.syncResource.kind,
      metadata: { name, namespace },
      status: {
        state: items.some((item) => item.state === 'Error') ? 'Error' : 'Ready',
        observedGeneration: sync['metadata'].generation,
        items,
      },
    },
    { fieldManager: FIELD_MANAGER, force: true },
  );
}

const get = (kind: 'moduleConfig' | 'syncResource', namespace: string, name: string) =>
  custom.getNamespacedCustomObject(ref(kind, namespace, name)).then(
    (object) => object as Json,
    (error: { code?: number }) => {
      if (error.code === 404) return undefined;
      throw error;
    },
  );

/** The sample module's rendering: a ConfigMap with the greeting. */
const greetingMap: RenderFunction = (config: ModuleConfig): Rendered[] => [
  {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'sample-greeting', namespace: 'kyma-system' },
    data: { greeting: String(config.spec.resource.spec?.['greeting'] ?? '') },
  },
];

async function startManager(
  namespace: string,
  render: RenderFunction,
  registry?: Registry,
  clock?: Clock,
  kubeConfig: KubeConfig = kcp,
) {
  const manager = createModuleManager({
    name: 'test-manager',
    module: 'sample',
    render,
    kubeConfig,
    namespace,
    ...(registry ? { registry } : {}),
    ...(clock ? { clock } : {}),
  });
  running.push(manager);
  await manager.start();
  return manager;
}

/**
 * A TCP relay in front of the KCP API server that counts the connections made through it (TLS passes through
 * untouched: the API server's certificate names 127.0.0.1), and a kubeconfig pointing at it.
 */
async function countingRelay(): Promise<{
  kubeConfig: KubeConfig;
  connections: () => number;
  close(): Promise<void>;
}> {
  const target = new URL(kcp.getCurrentCluster()?.server ?? '');
  let connections = 0;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    connections += 1;
    const upstream = createConnection({ host: target.hostname, port: Number(target.port) });
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromString(kcp.exportConfig());
  const cluster = kubeConfig.getCurrentCluster();
  kubeConfig.clusters = kubeConfig.clusters.map((entry) =>
    entry.name === cluster?.name ? { ...entry, server: `https://127.0.0.1:${port}` } : entry,
  );
  return {
    kubeConfig,
    connections: () => connections,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function writesOf(registry: Registry, operation: 'apply' | 'delete'): Promise<number> {
  const metric = await registry.getSingleMetric('module_manager_syncresource_writes_total')?.get();
  return metric?.values.find((value) => value.labels['operation'] === operation)?.value ?? 0;
}

const conditionOf = (config: Json | undefined): Json | undefined =>
  (config?.['status']?.conditions as Json[] | undefined)?.find((c) => c['type'] === 'test-manager/Synced');

/** The ModuleConfig `kyma-a-sample` of `namespace` once the manager's condition has `reason`. */
const withCondition = (namespace: string, reason: string): Promise<Json> =>
  eventually(`a${/^[AEIOU]/.test(reason) ? 'n' : ''} ${reason} condition`, async () => {
    const object = await get('moduleConfig', namespace, 'kyma-a-sample');
    return conditionOf(object)?.['reason'] === reason ? object : undefined;
  });

describe('module manager kit (real KCP API server)', function () {
  this.timeout(120_000);

  before(async () => {
    kcp = (await sharedEnvironment()).plane('kcp').kubeConfig();
    custom = kcp.makeApiClient(CustomObjectsApi);
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((manager) => manager.stop()));
  });

  it("renders each ModuleConfig of its module into one SyncResource under its own field manager; other modules' are left alone", async () => {
    const ns = await freshNamespace();
    await mirror(ns, 'kyma-a-sample', 'sample', { greeting: 'hello' });
    await mirror(ns, 'kyma-a-other', 'other', { greeting: 'not mine' });
    await startManager(ns, greetingMap);

    const syncName = syncResourceNameOf('test-manager', 'kyma-a-sample');
    const sync = await eventually('the SyncResource', () => get('syncResource', ns, syncName));
    expect(sync['spec']).to.deep.equal({
      kyma: 'kyma-a',
      items: [
        {
          name: 'configmap.kyma-system.sample-greeting',
          strategy: 'CreateAndSync',
          resource: {
            apiVersion: 'v1',
            kind: 'ConfigMap',
            metadata: { name: 'sample-greeting', namespace: 'kyma-system' },
            data: { greeting: 'hello' },
          },
        },
      ],
    });
    expect(sync['metadata'].labels).to.include({
      [LABELS.managedBy]: 'test-manager',
      [LABELS.moduleName]: 'sample',
      [LABELS.kymaName]: 'kyma-a',
    });
    expect(sync['metadata'].ownerReferences[0]).to.include({ kind: 'ModuleConfig', name: 'kyma-a-sample' });
    const managers = (sync['metadata'].managedFields as Json[]).map((entry) => entry['manager']);
    expect(managers).to.deep.equal(['test-manager']);
    const all = (await custom.listNamespacedCustomObject({
      group: GROUP,
      version: KINDS.syncResource.version,
      plural: KINDS.syncResource.plural,
      namespace: ns,
    })) as Json;
    expect(all['items'].map((item: Json) => item['metadata'].name)).to.deep.equal([syncName]);

    await mirror(ns, 'kyma-a-sample', 'sample', { greeting: 'changed' });
    await eventually('the SyncResource follows the edit', async () =>
      (await get('syncResource', ns, syncName))?.['spec'].items[0].resource.data.greeting === 'changed'
        ? true
        : undefined,
    );
  });

  it("carries the lifecycle manager's report from SyncResource.status onto the ModuleConfig as its own condition, beside the agent's status", async () => {
    const ns = await freshNamespace();
    await mirror(ns, 'kyma-a-sample', 'sample', { greeting: 'hello' });
    await startManager(ns, greetingMap);
    const syncName = syncResourceNameOf('test-manager', 'kyma-a-sample');
    await eventually('the SyncResource', () => get('syncResource', ns, syncName));

    const pending = await eventually('a Pending condition', async () => {
      const condition = conditionOf(await get('moduleConfig', ns, 'kyma-a-sample'));
      return condition?.['reason'] === 'Pending' ? condition : undefined;
    });
    expect(pending['status']).to.equal('Unknown');

    await reportApplied(ns, syncName);
    const config = await withCondition(ns, 'Applied');
    expect(conditionOf(config)).to.include({
      status: 'True',
      observedGeneration: config['metadata'].generation,
    });
    // The agent's own status fields are untouched: SSA keeps both owners' fields.
    expect(config['status'].state).to.equal('Ready');
    expect(config['status'].sourceResourceVersion).to.be.a('string');

    // A refused item, as the agent reports one, reaches the ModuleConfig with the agent's reason.
    await mirror(ns, 'kyma-a-sample', 'sample', { greeting: 'again' });
    await eventually('the new render', async () =>
      (await get('syncResource', ns, syncName))?.['spec'].items[0].resource.data.greeting === 'again'
        ? true
        : undefined,
    );
    await reportApplied(ns, syncName, {
      'configmap.kyma-system.sample-greeting': 'ConfigMap kyma-system/sample-greeting: refused for the test',
    });
    const failed = await withCondition(ns, 'ItemsFailed');
    expect(conditionOf(failed)).to.include({
      status: 'False',
      observedGeneration: failed['metadata'].generation,
    });
    expect(conditionOf(failed)?.['message']).to.contain('refused for the test');
    // The agent writing its status again (force) keeps the manager's condition.
    await mirror(ns, 'kyma-a-sample', 'sample', { greeting: 'again' });
    expect(conditionOf(await get('moduleConfig', ns, 'kyma-a-sample'))?.['reason']).to.equal('ItemsFailed');
  });

  it('writes Pending only when the agent has not reported within PENDING_AFTER_MS of a write: a prompt report costs one condition write', async () => {
    const ns = await freshNamespace();
    await mirror(ns, 'kyma-a-sample', 'sample', { greeting: 'hello' });
    const registry = createRegistry();
    // Time moves only when the test says: the agent's report below always comes "within" the grace.
    const clock = new ManualClock();
    const manager = await startManager(ns, greetingMap, registry, clock);
    const syncName = syncResourceNameOf('test-manager', 'kyma-a-sample');
    await eventually('the SyncResource', () => get('syncResource', ns, syncName));
    await manager.whenIdle();
    const conditionWrites = async () =>
      (await registry.getSingleMetric('module_manager_condition_writes_total')?.get())?.values.reduce(
        (sum, value) => sum + value.value,
        0,
      ) ?? 0;
    expect(conditionOf(await get('moduleConfig', ns, 'kyma-a-sample'))).to.equal(undefined);

    await reportApplied(ns, syncName);
    const config = await withCondition(ns, 'Applied');
    expect(conditionOf(config)?.['observedGeneration']).to.equal(config['metadata'].generation);
    await manager.whenIdle();
    expect(await conditionWrites()).to.equal(1);

    // No report for the next render: once the grace has passed, the condition says Pending for it.
    await mirror(ns, 'kyma-a-sample', 'sample', { greeting: 'again' });
    await eventually('the new render', async () =>
      (await get('syncResource', ns, syncName))?.['spec'].items[0].resource.data.greeting === 'again'
        ? true
        : undefined,
    );
    await manager.whenIdle();
    expect(conditionOf(await get('moduleConfig', ns, 'kyma-a-sample'))?.['reason']).to.equal('Applied');
    await clock.advance(PENDING_AFTER_MS);
    const pending = await withCondition(ns, 'Pending');
    expect(conditionOf(pending)).to.include({
      status: 'Unknown',
      observedGeneration: pending['metadata'].generation,
    });
  });

  it('writes no SyncResource for edits that leave the rendered objects as they were, nor when restarted', async () => {
    const ns = await freshNamespace();
    await mirror(ns, 'kyma-a-sample', 'sample', { greeting: 'hello', replicas: 1 });
    const registry = createRegistry();
    const first = await startManager(ns, greetingMap, registry);
    const syncName = syncResourceNameOf('test-manager', 'kyma-a-sample');
    const written = await eventually('the SyncResource', () => get('syncResource', ns, syncName));
    await first.whenIdle();
    expect(await writesOf(registry, 'apply')).to.equal(1);

    // replicas is not rendered: the ModuleConfig changes, the SyncResource does not.
    for (const replicas of [2, 3, 4])
      await mirror(ns, 'kyma-a-sample', 'sample', { greeting: 'hello', replicas });
    await eventually('the condition for the last generation', async () => {
      const config = await get('moduleConfig', ns, 'kyma-a-sample');
      return conditionOf(config)?.['observedGeneration'] === config?.['metadata'].generation
        ? true
        : undefined;
    });
    await first.whenIdle();
    expect(await writesOf(registry, 'apply')).to.equal(1);

    await first.stop();
    const restartedRegistry = createRegistry();
    const second = await startManager(ns, greetingMap, restartedRegistry);
    await second.whenIdle();
    expect(await writesOf(restartedRegistry, 'apply')).to.equal(0);
    const after = await get('syncResource', ns, syncName);
    expect(after?.['metadata'].resourceVersion).to.equal(written['metadata'].resourceVersion);
  });

  it('keeps its connections to the KCP: ten edits, each a SyncResource write, open no new connection', async () => {
    const ns = await freshNamespace();
    await mirror(ns, 'kyma-a-sample', 'sample', { greeting: 'edit-0' });
    const relay = await countingRelay();
    try {
      const registry = createRegistry();
      const manager = await startManager(ns, greetingMap, registry, undefined, relay.kubeConfig);
      const syncName = syncResourceNameOf('test-manager', 'kyma-a-sample');
      const shows = (greeting: string) =>
        eventually(`the SyncResource with ${greeting}`, async () =>
          (await get('syncResource', ns, syncName))?.['spec'].items[0].resource.data.greeting === greeting
            ? true
            : undefined,
        );
      await shows('edit-0');
      await manager.whenIdle();
      // The lists and watches of both informers and the first write are in place: from here only writes follow.
      const settled = relay.connections();
      for (let edit = 1; edit <= 10; edit++) {
        await mirror(ns, 'kyma-a-sample', 'sample', { greeting: `edit-${edit}` });
        await shows(`edit-${edit}`);
      }
      await manager.whenIdle();
      expect(await writesOf(registry, 'apply')).to.equal(11);
      // client-node's own path opens one per request (at least ten here); a kept pool opens none, or one if the
      // API server closed an idle one meanwhile.
      expect(relay.connections() - settled).to.be.at.most(2);
    } finally {
      await Promise.all(running.splice(0).map((manager) => manager.stop()));
      await relay.close();
    }
  });

  it('deletes the SyncResource when its ModuleConfig goes, also when it went while the manager was stopped', async () => {
    const ns = await freshNamespace();
    await mirror(ns, 'kyma-a-sample', 'sample', { greeting: 'hello' });
    await mirror(ns, 'kyma-b-sample', 'sample', { greeting: 'hi' });
    const first = await startManager(ns, greetingMap);
    const nameA = syncResourceNameOf('test-manager', 'kyma-a-sample');
    const nameB = syncResourceNameOf('test-manager', 'kyma-b-sample');
    await eventually('both SyncResources', async () =>
      (await get('syncResource', ns, nameA)) && (await get('syncResource', ns, nameB)) ? true : undefined,
    );

    await custom.deleteNamespacedCustomObject(ref('moduleConfig', ns, 'kyma-a-sample'));
    await eventually('SyncResource A deleted', async () =>
      (await get('syncResource', ns, nameA)) === undefined ? true : undefined,
    );

    await first.stop();
    await custom.deleteNamespacedCustomObject(ref('moduleConfig', ns, 'kyma-b-sample'));
    await startManager(ns, greetingMap);
    await eventually('SyncResource B deleted after the restart', async () =>
      (await get('syncResource', ns, nameB)) === undefined ? true : undefined,
    );
  });

  it('reports a render that throws as RenderFailed and leaves the last SyncResource in place', async () => {
    const ns = await freshNamespace();
    await mirror(ns, 'kyma-a-sample', 'sample', { greeting: 'hello' });
    await startManager(ns, (config) => {
      if (config.spec.resource.spec?.['greeting'] === 'boom') throw new Error('greeting boom is not allowed');
      return greetingMap(config);
    });
    const syncName = syncResourceNameOf('test-manager', 'kyma-a-sample');
    await eventually('the SyncResource', () => get('syncResource', ns, syncName));

    await mirror(ns, 'kyma-a-sample', 'sample', { greeting: 'boom' });
    const condition = await eventually('a RenderFailed condition', async () => {
      const found = conditionOf(await get('moduleConfig', ns, 'kyma-a-sample'));
      return found?.['reason'] === 'RenderFailed' ? found : undefined;
    });
    expect(condition['status']).to.equal('False');
    expect(condition['message']).to.contain('greeting boom is not allowed');
    expect((await get('syncResource', ns, syncName))?.['spec'].items[0].resource.data.greeting).to.equal(
      'hello',
    );
  });
});
