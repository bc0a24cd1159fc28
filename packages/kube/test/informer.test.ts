// ResilientInformer against a private, real kube-apiserver: it keeps delivering events after the API
// server restarts, after a 410 Gone, and after its watchdog restarts a silent watch.
import { readFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { expect } from 'chai';
import { CoreV1Api, CustomObjectsApi, type KubeConfig, type V1Secret } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS, type Kyma } from '@skr-watcher/api';
import { createRegistry, type Registry } from '@skr-watcher/telemetry';
import { startEnvironment, type Environment } from '@skr-watcher/testenv';
import {
  ResilientInformer,
  customResourceSource,
  metadataOnly,
  objectKey,
  secretSource,
  type InformerSource,
  type PartialObjectMetadata,
} from '../src/informer.js';
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

setFlagsFromString('--allow-natives-syntax');
/** Whether V8 keeps the object's fields in its fast layout, not in a hash table (what `delete` leaves behind). */
const hasFastProperties = new Function('object', 'return %HasFastProperties(object)') as (
  object: object,
) => boolean;

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

  it('lists (page by page) and watches metadata only: no Secret data reaches the process', async () => {
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const labels = { 'informer-test': 'metadata' };
    // 64 kB of data each: what a full list or watch event would carry.
    const secret = (name: string, fill: string) => ({
      metadata: { name, labels },
      stringData: { config: fill.repeat(65_536) },
    });
    for (const name of ['meta-a', 'meta-b', 'meta-c']) {
      await core.createNamespacedSecret({ namespace, body: secret(name, 'x') });
    }
    const informer = new ResilientInformer<PartialObjectMetadata>({
      kubeConfig,
      source: metadataOnly(
        kubeConfig,
        secretSource(kubeConfig, { namespace, labelSelector: 'informer-test' }),
      ),
      pageSize: 2,
    });
    const seen: string[] = [];
    informer.addHandler({
      onAdd: (s) => seen.push(`add ${s.metadata?.name}`),
      onUpdate: (previous, s) => {
        if (previous.metadata?.resourceVersion !== s.metadata?.resourceVersion)
          seen.push(`update ${s.metadata?.name}`);
      },
      onDelete: (s) => seen.push(`delete ${s.metadata?.name}`),
    });
    informer.start();
    try {
      await informer.waitForSync();
      expect(informer.keys().sort()).to.deep.equal(
        ['meta-a', 'meta-b', 'meta-c'].map((n) => `${namespace}/${n}`),
      );
      await core.createNamespacedSecret({ namespace, body: secret('meta-d', 'y') });
      await core.replaceNamespacedSecret({ namespace, name: 'meta-a', body: secret('meta-a', 'z') });
      await core.deleteNamespacedSecret({ namespace, name: 'meta-b' });
      await waitUntil('the three changes arrive', () => seen.includes('delete meta-b'));
      expect(seen.slice(3)).to.deep.equal(['add meta-d', 'update meta-a', 'delete meta-b']);
      for (const cached of informer.list()) {
        // The API server's conversion names the kind; a Secret sent whole and trimmed here would say `Secret`.
        expect(cached.kind, cached.metadata?.name).to.equal('PartialObjectMetadata');
        expect(cached).to.not.have.property('data');
        expect(JSON.stringify(cached).length).to.be.below(2_048);
      }
    } finally {
      await informer.stop();
    }
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
        // Dropped by copying: a field deleted from an object turns it into a hash table (~0.8 kB per Manifest).
        expect(hasFastProperties(cached!.metadata!), `${name}: metadata in V8's fast layout`).to.equal(true);
        expect(hasFastProperties(cached!.metadata!.annotations!), `${name}: annotations too`).to.equal(true);
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

  /** Kymas of a label selector, as whole objects or as metadata only. */
  const kymaSource = (labelSelector: string, metadata: boolean): InformerSource<Kyma> => {
    const source = customResourceSource<Kyma>(kubeConfig, { ...KYMA, namespace, labelSelector });
    return metadata ? metadataOnly<Kyma>(kubeConfig, source) : source;
  };
  for (const [variant, metadata] of [
    ['', false],
    [' (metadata only)', true],
  ] as const) {
    const tag = metadata ? 'meta' : 'full';

    it(`relists after 410 Gone and then sees what changed and keeps watching${variant}`, async () => {
      const registry = createRegistry();
      const selected = { 'informer-test': `gone-${tag}` };
      const informer = new ResilientInformer<Kyma>({
        kubeConfig,
        source: kymaSource(`informer-test=gone-${tag}`, metadata),
        registry,
        backoffMaxMs: 2_000,
      });
      await create(`gone-1-${tag}`, selected);
      informer.start();
      await informer.waitForSync();
      const relistsBefore = await counterValue(registry, 'informer_relists_total', { resource: 'kymas' });
      // Writes the informer does not select move the revision past the informer's resourceVersion.
      for (let i = 0; i < 5; i++) await create(`unselected-${i}-${tag}`);
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
      expect(informer.keys()).to.deep.equal([`${namespace}/gone-1-${tag}`]);
      await create(`gone-2-${tag}`, selected);
      await waitUntil(
        'the watch after the relist delivers',
        () => !!informer.get(`${namespace}/gone-2-${tag}`),
      );
      if (metadata) expect(informer.get(`${namespace}/gone-2-${tag}`)).to.not.have.property('spec');
      await informer.stop();
    });

    it(`restarts a watch that stays silent longer than the watchdog allows, and still delivers${variant}`, async () => {
      const registry = createRegistry();
      const informer = new ResilientInformer<Kyma>({
        kubeConfig,
        source: kymaSource(`informer-test=silent-${tag}`, metadata),
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
      await create(`silent-1-${tag}`, { 'informer-test': `silent-${tag}` });
      await waitUntil(
        'the watch after the watchdog delivers',
        () => !!informer.get(`${namespace}/silent-1-${tag}`),
      );
      await informer.stop();
    });
  }

  it('resyncs periodically from its cache: every object reported to onUpdate, nothing listed again', async () => {
    const registry = createRegistry();
    const informer = new ResilientInformer<Kyma>({
      kubeConfig,
      source: customResourceSource<Kyma>(kubeConfig, { ...KYMA, namespace }),
      resyncMs: 1_000,
      registry,
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
    await waitUntil(
      'a second resync',
      async () => (await counterValue(registry, 'informer_resyncs_total', { resource: 'kymas' })) >= 2,
    );
    expect(await counterValue(registry, 'informer_relists_total', { resource: 'kymas' })).to.equal(1);
    // The watch still keeps the cache true between resyncs.
    await create('after-resyncs');
    await waitUntil('a Kyma created after the resyncs arrives', () =>
      informer.keys().includes(`${namespace}/after-resyncs`),
    );
    await informer.stop();
  });

  it('takes an object this process wrote ahead of its watch event, once, and no older copy over it', async () => {
    await create('ahead');
    await create('ahead-marker');
    const informer = new ResilientInformer<PartialObjectMetadata>({
      kubeConfig,
      source: metadataOnly(kubeConfig, customResourceSource(kubeConfig, { ...KYMA, namespace })),
    });
    const owners: string[] = [];
    informer.addHandler({
      onUpdate: (previous, object) => {
        const owner = object.metadata?.labels?.[LABELS.shardOwner];
        if (object.metadata?.name === 'ahead' && owner !== previous.metadata?.labels?.[LABELS.shardOwner]) {
          owners.push(owner ?? '');
        }
      },
    });
    informer.start();
    await informer.waitForSync();
    const key = `${namespace}/ahead`;
    const ownerNow = () => informer.get(key)?.metadata?.labels?.[LABELS.shardOwner];
    const label = (name: string, owner: string) =>
      api.patchNamespacedCustomObject({
        ...KYMA,
        namespace,
        name,
        body: [{ op: 'add', path: '/metadata/labels', value: { [LABELS.shardOwner]: owner } }],
      }) as Promise<PartialObjectMetadata>;
    /** Every watch event written before it has arrived once the marker's has (one watch, in etcd order). */
    const drainWatch = async (mark: string) => {
      await label('ahead-marker', mark);
      await waitUntil(
        'the marker arrives',
        () => informer.get(`${namespace}/ahead-marker`)?.metadata?.labels?.[LABELS.shardOwner] === mark,
      );
    };
    const unwritten = structuredClone(informer.get(key)) as PartialObjectMetadata;

    // A real write: taken at once (or found already taken, when its watch event won the race), reported once.
    informer.observeWritten(await label('ahead', 'replica-a'));
    expect(ownerNow()).to.equal('replica-a');
    await drainWatch('m1');
    expect(owners).to.deep.equal(['replica-a']);

    // An older copy than the cached one is not taken.
    expect(informer.observeWritten(structuredClone(unwritten))).to.equal(false);
    expect(ownerNow()).to.equal('replica-a');
    // Nor one whose resourceVersion is no revision.
    const opaque = structuredClone(unwritten);
    opaque.metadata = { ...opaque.metadata, resourceVersion: 'abc', labels: { [LABELS.shardOwner]: 'x' } };
    expect(informer.observeWritten(opaque)).to.equal(false);

    // A written copy far ahead of the server (a revision no write has reached yet): a later server copy that is
    // still older is not cached over it; one at or past it is.
    const ahead = structuredClone(informer.get(key)) as PartialObjectMetadata;
    const revision = BigInt(ahead.metadata?.resourceVersion ?? '0') + 1_000_000n;
    ahead.metadata = {
      ...ahead.metadata,
      resourceVersion: String(revision),
      labels: { [LABELS.shardOwner]: 'replica-b' },
    };
    expect(informer.observeWritten(ahead)).to.equal(true);
    expect(owners).to.deep.equal(['replica-a', 'replica-b']);
    await label('ahead', 'replica-c');
    await drainWatch('m2');
    expect(ownerNow(), 'the older server copy was not cached over the written one').to.equal('replica-b');
    await informer.stop();
    expect(
      informer.observeWritten(await label('ahead', 'replica-d')),
      'a stopped informer takes nothing',
    ).to.equal(false);
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
