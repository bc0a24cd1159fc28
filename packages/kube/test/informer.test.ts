// ResilientInformer against a private, real kube-apiserver: it keeps delivering events after the API
// server restarts, after a 410 Gone, and after its watchdog restarts a silent watch.
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { CoreV1Api, CustomObjectsApi, type KubeConfig, type V1Secret } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS, type Kyma } from '@skr-watcher/api';
import { createRegistry, type Registry } from '@skr-watcher/telemetry';
import { startEnvironment, type Environment } from '@skr-watcher/testenv';
import { ResilientInformer, customResourceSource, objectKey, secretSource } from '../src/informer.js';
import { pooledKubeConfig } from '../src/pooled-kubeconfig.js';
import { waitUntil } from '../../../test/support/eventually.js';

const KYMA = { group: GROUP, version: KINDS.kyma.version, plural: KINDS.kyma.plural };
const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';

async function counterValue(
  registry: Registry,
  name: string,
  labels: Record<string, string>,
): Promise<number> {
  const metric = registry.getSingleMetric(name);
  if (!metric) return 0;
  const { values } = await metric.get();
  return values
    .filter((v) => Object.entries(labels).every(([k, value]) => v.labels[k] === value))
    .reduce((sum, v) => sum + v.value, 0);
}

/** The etcd client URL of a private environment, read from its etcd's command line. */
function etcdUrlOf(env: Environment): string {
  for (const pid of env.pids()) {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    const flag = cmdline.find((arg) => arg.startsWith('--listen-client-urls='));
    if (flag && cmdline.some((arg) => arg.endsWith('etcd'))) return flag.split('=')[1]!;
  }
  throw new Error('no etcd process in the environment');
}

/** Compacts etcd's history up to its current revision, so older resourceVersions become 410 Gone. */
async function compactEtcd(env: Environment): Promise<void> {
  const url = etcdUrlOf(env);
  const range = await fetch(`${url}/v3/kv/range`, {
    method: 'POST',
    body: JSON.stringify({ key: Buffer.from('/').toString('base64') }),
  });
  const revision = ((await range.json()) as { header: { revision: string } }).header.revision;
  const compaction = await fetch(`${url}/v3/kv/compaction`, {
    method: 'POST',
    body: JSON.stringify({ revision, physical: true }),
  });
  if (!compaction.ok)
    throw new Error(`etcd compaction failed: ${compaction.status} ${await compaction.text()}`);
}

function kyma(namespace: string, name: string, labels: Record<string, string> = {}): Kyma {
  return {
    apiVersion: `${GROUP}/${KINDS.kyma.version}`,
    kind: 'Kyma',
    metadata: { name, namespace, labels },
    spec: { channel: 'regular', modules: [] },
  };
}

describe('ResilientInformer on a real API server', function () {
  this.timeout(180_000);
  let env: Environment;
  let kubeConfig: KubeConfig;
  let api: CustomObjectsApi;
  const namespace = `informer-${Date.now()}`;

  before(async () => {
    env = await startEnvironment({ planes: ['kcp'] });
    kubeConfig = env.plane('kcp').kubeConfig();
    api = kubeConfig.makeApiClient(CustomObjectsApi);
    await kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
  });

  after(async () => {
    await env?.stop();
  });

  const create = (name: string, labels: Record<string, string> = {}) =>
    api.createNamespacedCustomObject({ ...KYMA, namespace, body: kyma(namespace, name, labels) });

  it('lists, then delivers adds, updates and deletes, and indexes Kymas by runtime-id', async () => {
    await create('pre-existing', { [LABELS.runtimeId]: 'rt-1' });
    const informer = new ResilientInformer<Kyma>({
      kubeConfig,
      source: customResourceSource<Kyma>(kubeConfig, { ...KYMA, namespace }),
      pageSize: 1, // forces paging through continue tokens
    });
    informer.addIndex('runtime-id', (k) => {
      const runtimeId = k.metadata.labels?.[LABELS.runtimeId];
      return runtimeId ? [runtimeId] : [];
    });
    const seen: string[] = [];
    informer.addHandler({
      onAdd: (k) => seen.push(`add ${k.metadata.name}`),
      onUpdate: (prev, k) => {
        if (prev.metadata.resourceVersion !== k.metadata.resourceVersion)
          seen.push(`update ${k.metadata.name}`);
      },
      onDelete: (k) => seen.push(`delete ${k.metadata.name}`),
    });
    await create('second');
    informer.start();
    await informer.waitForSync();
    expect(informer.keys().sort()).to.deep.equal([`${namespace}/pre-existing`, `${namespace}/second`]);
    expect(informer.byIndex('runtime-id', 'rt-1').map(objectKey)).to.deep.equal([
      `${namespace}/pre-existing`,
    ]);

    await create('third', { [LABELS.runtimeId]: 'rt-3' });
    await api.patchNamespacedCustomObject({
      ...KYMA,
      namespace,
      name: 'second',
      body: [{ op: 'add', path: '/metadata/labels', value: { [LABELS.runtimeId]: 'rt-2' } }],
    });
    await api.deleteNamespacedCustomObject({ ...KYMA, namespace, name: 'pre-existing' });
    await waitUntil('the three changes arrive', () => seen.includes('delete pre-existing'));
    expect(seen.filter((s) => !s.startsWith('add pre') && s !== 'add second')).to.deep.equal([
      'add third',
      'update second',
      'delete pre-existing',
    ]);
    expect(informer.byIndex('runtime-id', 'rt-1')).to.deep.equal([]);
    expect(informer.byIndex('runtime-id', 'rt-2').map(objectKey)).to.deep.equal([`${namespace}/second`]);
    expect(informer.byIndex('runtime-id', 'rt-3').map(objectKey)).to.deep.equal([`${namespace}/third`]);
    await informer.stop();
  });

  it('pages through every Secret of a label selector (client-node names the continue token `_continue`)', async () => {
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const names = ['kubeconfig-a', 'kubeconfig-b', 'kubeconfig-c', 'kubeconfig-d', 'kubeconfig-e'];
    for (const name of names) {
      await core.createNamespacedSecret({
        namespace,
        body: { metadata: { name, labels: { [LABELS.kymaName]: name } }, stringData: { config: 'x' } },
      });
    }
    const informer = new ResilientInformer<V1Secret>({
      kubeConfig,
      source: secretSource(kubeConfig, { namespace, labelSelector: LABELS.kymaName }),
      pageSize: 2, // three pages: before the fix only the first was read
    });
    informer.start();
    await informer.waitForSync();
    expect(informer.keys().sort()).to.deep.equal(names.map((name) => `${namespace}/${name}`));
    await informer.stop();
  });

  it("caches objects without managedFields and kubectl's last-applied-configuration, listed or watched, and keeps everything else the server returned", async () => {
    // `kubectl apply` copies the whole object into this annotation: for a kubeconfig Secret, its data.
    const annotations = { [LAST_APPLIED]: '{"data":{"config":"a kubeconfig"}}', 'example.com/kept': 'yes' };
    const createAnnotated = (name: string) => {
      const body = kyma(namespace, name, { [LABELS.runtimeId]: 'rt-mf' });
      return api.createNamespacedCustomObject({
        ...KYMA,
        namespace,
        body: { ...body, metadata: { ...body.metadata, annotations } },
      });
    };
    await createAnnotated('listed-mf');
    const informer = new ResilientInformer<Kyma>({
      kubeConfig,
      source: customResourceSource<Kyma>(kubeConfig, { ...KYMA, namespace }),
    });
    informer.start();
    try {
      await informer.waitForSync();
      await createAnnotated('watched-mf');
      await waitUntil('the watch delivers watched-mf', () => !!informer.get(`${namespace}/watched-mf`));
      for (const name of ['listed-mf', 'watched-mf']) {
        const onServer = (await api.getNamespacedCustomObject({ ...KYMA, namespace, name })) as Kyma & {
          metadata: { managedFields?: unknown[]; annotations?: Record<string, string> };
        };
        expect(onServer.metadata.managedFields, 'the server keeps them').to.have.length.greaterThan(0);
        expect(onServer.metadata.annotations).to.have.property(LAST_APPLIED);
        const cached = informer.get(`${namespace}/${name}`);
        const { managedFields: _dropped, ...metadata } = onServer.metadata;
        expect(cached).to.deep.equal({
          ...onServer,
          metadata: { ...metadata, annotations: { 'example.com/kept': 'yes' } },
        });
      }
    } finally {
      await informer.stop();
    }
  });

  it('keeps delivering events after the API server restarts', async () => {
    const registry = createRegistry();
    const informer = new ResilientInformer<Kyma>({
      kubeConfig,
      source: customResourceSource<Kyma>(kubeConfig, { ...KYMA, namespace }),
      registry,
      backoffMaxMs: 2_000,
    });
    informer.start();
    await informer.waitForSync();
    await env.plane('kcp').restart();
    await create('after-restart');
    await waitUntil(
      'the Kyma created after the restart is in the cache',
      () => !!informer.get(`${namespace}/after-restart`),
    );
    expect(
      await counterValue(registry, 'informer_watch_restarts_total', { resource: 'kymas' }),
    ).to.be.greaterThan(0);
    await informer.stop();
  });

  it('relists after 410 Gone and then sees what changed and keeps watching', async () => {
    const registry = createRegistry();
    const selected = { 'informer-test': 'gone' };
    const informer = new ResilientInformer<Kyma>({
      kubeConfig,
      source: customResourceSource<Kyma>(kubeConfig, {
        ...KYMA,
        namespace,
        labelSelector: 'informer-test=gone',
      }),
      registry,
      backoffMaxMs: 2_000,
    });
    await create('gone-1', selected);
    informer.start();
    await informer.waitForSync();
    const relistsBefore = await counterValue(registry, 'informer_relists_total', { resource: 'kymas' });
    // Writes the informer does not select move the revision past the informer's resourceVersion.
    for (let i = 0; i < 5; i++) await create(`unselected-${i}`);
    await env.plane('kcp').stopApiServer();
    await compactEtcd(env);
    await env.plane('kcp').startApiServer();
    await waitUntil(
      'a 410 makes the informer relist',
      async () =>
        (await counterValue(registry, 'informer_relists_total', { resource: 'kymas' })) > relistsBefore,
    );
    expect(
      await counterValue(registry, 'informer_watch_restarts_total', { resource: 'kymas', reason: 'gone' }),
    ).to.be.greaterThan(0);
    expect(informer.keys()).to.deep.equal([`${namespace}/gone-1`]);
    await create('gone-2', selected);
    await waitUntil('the watch after the relist delivers', () => !!informer.get(`${namespace}/gone-2`));
    await informer.stop();
  });

  it('restarts a watch that stays silent longer than the watchdog allows, and still delivers', async () => {
    const registry = createRegistry();
    const informer = new ResilientInformer<Kyma>({
      kubeConfig,
      source: customResourceSource<Kyma>(kubeConfig, {
        ...KYMA,
        namespace,
        labelSelector: 'informer-test=silent',
      }),
      registry,
      watchdogMs: 1_000,
    });
    informer.start();
    await informer.waitForSync();
    await waitUntil(
      'the watchdog fires on the quiet watch',
      async () =>
        (await counterValue(registry, 'informer_watch_restarts_total', { reason: 'watchdog' })) >= 2,
    );
    await create('silent-1', { 'informer-test': 'silent' });
    await waitUntil('the watch after the watchdog delivers', () => !!informer.get(`${namespace}/silent-1`));
    await informer.stop();
  });

  it('relists periodically and reports every object to onUpdate', async () => {
    const informer = new ResilientInformer<Kyma>({
      kubeConfig,
      source: customResourceSource<Kyma>(kubeConfig, { ...KYMA, namespace }),
      resyncMs: 1_000,
    });
    const resynced = new Set<string>();
    informer.addHandler({
      onUpdate: (prev, k) => {
        if (prev.metadata.resourceVersion === k.metadata.resourceVersion) resynced.add(objectKey(k));
      },
    });
    informer.start();
    await informer.waitForSync();
    await waitUntil('every cached Kyma is resynced', () => resynced.size === informer.keys().length);
    await informer.stop();
  });

  it('a pooled KubeConfig reuses its connections for lists and watches (client-node alone opens one per request)', async () => {
    const pool = await pooledKubeConfig(kubeConfig);
    const pooledApi = pool.kubeConfig.makeApiClient(CustomObjectsApi);
    for (let i = 0; i < 20; i++) await pooledApi.listNamespacedCustomObject({ ...KYMA, namespace, limit: 1 });
    expect(pool.connectionsOpened(), '20 sequential lists over one kept-alive connection').to.be.at.most(2);
    const informer = new ResilientInformer<Kyma>({
      kubeConfig: pool.kubeConfig,
      source: customResourceSource<Kyma>(pool.kubeConfig, { ...KYMA, namespace }),
    });
    informer.start();
    await informer.waitForSync();
    await create('pooled-1');
    await waitUntil('the pooled watch delivers', () => !!informer.get(`${namespace}/pooled-1`));
    expect(pool.connectionsOpened()).to.be.at.most(3);
    await informer.stop();
    await pool.close();
  });
});
