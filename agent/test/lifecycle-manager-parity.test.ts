// What a team moving from upstream lifecycle-manager finds where its tools look, reconciled for real on a KCP and an
// SKR: module entries turn Error while the SKR cannot be reached and back once it answers; the SKR Kyma and the SKR's
// kyma-system Namespace carry upstream's labels (so `managed-by=kyma` selects them) while the agent's own objects keep
// theirs; the module catalog copied into the SKR offers only the channels the Kyma may use (decision 027).
import { readFile } from 'node:fs/promises';
import { expect } from 'chai';
import { CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { DEFAULTS, GROUP, KINDS, LABELS, MANAGED_BY } from '@skr-watcher/api';
import { freePort, startEnvironment, type Environment } from '@skr-watcher/testenv';
import { createManager, type Manager } from '../src/manager/index.js';
import {
  custom,
  getOrUndefined,
  kymaRef,
  readCustom,
  refTo,
  untilCrdsServe,
  untilInWatchCache,
  wipeSkrKyma,
} from './support/planes.js';

type Json = Record<string, unknown>;
type Kind = keyof typeof KINDS;
interface ModuleEntry {
  name: string;
  state: string;
  message?: string;
}

const SKR_NS = DEFAULTS.skrNamespace;
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const skrKymaRef = refTo('kyma', SKR_NS, DEFAULTS.skrKymaName);

let env: Environment;
let kcp: KubeConfig;
let skr: KubeConfig;
let counter = 0;

async function create(kind: Kind, namespace: string, body: Json): Promise<void> {
  const { group, version, plural } = refTo(kind, namespace, '');
  await custom(kcp).createNamespacedCustomObject({
    group,
    version,
    plural,
    namespace,
    body: { apiVersion: `${GROUP}/${version}`, kind: KINDS[kind].kind, ...body },
  });
}

const read = readCustom;

/** The kubeconfig Secret of `kyma`, pointing at the SKR, or at a port where nothing listens. */
async function kubeconfigSecret(namespace: string, kyma: string, reachable: boolean): Promise<void> {
  const core = kcp.makeApiClient(CoreV1Api);
  let config = await readFile(env.plane('skr1').kubeconfigPath, 'utf8');
  if (!reachable)
    config = config.replace(
      /server: https:\/\/127\.0\.0\.1:\d+/,
      `server: https://127.0.0.1:${await freePort()}`,
    );
  const name = `kubeconfig-${kyma}`;
  const body = { metadata: { name, namespace, labels: { [LABELS.kymaName]: kyma } }, stringData: { config } };
  const present = await getOrUndefined(() => core.readNamespacedSecret({ namespace, name }));
  if (present) await core.replaceNamespacedSecret({ namespace, name, body });
  else await core.createNamespacedSecret({ namespace, body });
  await untilInWatchCache(() => core.listNamespacedSecret({ namespace, resourceVersion: '0' }), name);
}

/** A module's ModuleReleaseMeta and, per version, a ModuleTemplate (labelled as `labels` says for that version). */
async function catalogEntry(
  namespace: string,
  module: string,
  channels: Record<string, string>,
  labels: Record<string, Record<string, string>> = {},
): Promise<void> {
  await create('moduleReleaseMeta', namespace, {
    metadata: { name: module, namespace },
    spec: {
      moduleName: module,
      channels: Object.entries(channels).map(([channel, version]) => ({ channel, version })),
    },
  });
  for (const version of new Set(Object.values(channels))) {
    await create('moduleTemplate', namespace, {
      metadata: { name: `${module}-${version}`, namespace, labels: labels[version] ?? {} },
      spec: {
        moduleName: module,
        version,
        data: {
          apiVersion: `${GROUP}/${KINDS.sample.version}`,
          kind: KINDS.sample.kind,
          metadata: { name: module, namespace: SKR_NS },
          spec: { greeting: `hello from ${module} ${version}` },
        },
      },
    });
  }
}

async function createKyma(namespace: string, name: string, modules: Json[], labels: Json = {}) {
  await kubeconfigSecret(namespace, name, true);
  await create('kyma', namespace, {
    metadata: { name, namespace, labels: { [LABELS.runtimeId]: name, ...labels } },
    spec: { channel: 'regular', modules },
  });
}

async function kymaStatus(namespace: string, name: string) {
  const kyma = (await read(kcp, 'kyma', namespace, name)) as { status: Json } | undefined;
  return kyma?.status as { state: string; modules: ModuleEntry[]; conditions: Json[] };
}

function kymaList(namespace: string) {
  const { group, version, plural } = refTo('kyma', namespace, '');
  return { group, version, plural, namespace };
}

async function labelsOf(kc: KubeConfig, kind: Kind, namespace: string, name: string) {
  return (
    ((await read(kc, kind, namespace, name))?.['metadata'] as { labels?: Record<string, string> }).labels ??
    {}
  );
}

describe('lifecycle-manager parity where its users look (real KCP and SKR)', function () {
  this.timeout(120_000);
  let manager: Manager;
  let ns: string;

  before(async function () {
    env = await startEnvironment({ planes: ['kcp', 'skr1'] });
    kcp = env.plane('kcp').kubeConfig();
    skr = env.plane('skr1').kubeConfig();
    await untilCrdsServe([kcp, skr]);
    // An SKR an older agent set up: kyma-system without upstream's labels.
    await skr
      .makeApiClient(CoreV1Api)
      .createNamespace({ body: { metadata: { name: SKR_NS, labels: { [LABELS.managedBy]: MANAGED_BY } } } });
  });

  after(async function () {
    await env?.stop();
  });

  beforeEach(async function () {
    counter += 1;
    ns = `lm-parity-${process.pid}-${counter}`;
    await kcp.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: ns } } });
    manager = createManager({ kcp, namespace: ns, skrTimeoutMs: 2_000 });
  });

  afterEach(async function () {
    await manager.close();
    await wipeSkrKyma(skr, SKR_NS);
  });

  it('marks every module entry Error while the SKR is unreachable, and reports them afresh once it answers', async function () {
    await catalogEntry(ns, 'sample', { regular: '1.0.0' });
    await catalogEntry(ns, 'other', { regular: '2.0.0' });
    await catalogEntry(ns, 'users', { regular: '3.0.0' });
    await createKyma(ns, 'kyma-gone', [
      { name: 'sample' },
      { name: 'other' },
      { name: 'users', managed: false },
    ]);
    await manager.reconciler.reconcile(`${ns}/kyma-gone`);
    let status = await kymaStatus(ns, 'kyma-gone');
    const states = () => status.modules.map((m) => [m.name, m.state]);
    expect(states()).to.deep.equal([
      ['sample', 'Ready'],
      ['other', 'Ready'],
      ['users', 'Unmanaged'],
    ]);

    await kubeconfigSecret(ns, 'kyma-gone', false);
    const failure = await manager.reconciler.reconcile(`${ns}/kyma-gone`).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure, 'the pass backs off').to.be.instanceOf(Error);
    status = await kymaStatus(ns, 'kyma-gone');
    expect(status.state).to.equal('Error');
    const connected = status.conditions.find((c) => c['type'] === 'SKRConnected');
    expect(connected).to.include({ status: 'False', reason: 'SKRUnreachable' });
    // The module the user runs stays Unmanaged: that state keeps its Module CR from ever being deleted.
    expect(states()).to.deep.equal([
      ['sample', 'Error'],
      ['other', 'Error'],
      ['users', 'Unmanaged'],
    ]);
    for (const module of status.modules.filter((m) => m.state === 'Error')) {
      // Upstream's message is the error that stopped the pass: the same words as the condition's.
      expect(module.message, module.name).to.equal(connected?.['message']);
    }

    await kubeconfigSecret(ns, 'kyma-gone', true);
    await manager.reconciler.reconcile(`${ns}/kyma-gone`);
    status = await kymaStatus(ns, 'kyma-gone');
    expect(status.state).to.equal('Ready');
    expect(states()).to.deep.equal([
      ['sample', 'Ready'],
      ['other', 'Ready'],
      ['users', 'Unmanaged'],
    ]);
    for (const module of status.modules) expect(module.message, module.name).to.equal(undefined);
  });

  it("labels the SKR Kyma and kyma-system as upstream does, and keeps the agent's own objects selectable by its label", async function () {
    await catalogEntry(ns, 'sample', { regular: '1.0.0' });
    // The SKR Kyma an older agent created: managed-by skr-watcher, watched-by lifecycle-manager.
    await custom(skr).createNamespacedCustomObject({
      ...skrKymaRef,
      body: {
        apiVersion: `${GROUP}/${KINDS.kyma.version}`,
        kind: KINDS.kyma.kind,
        metadata: {
          name: skrKymaRef.name,
          namespace: SKR_NS,
          labels: { [LABELS.managedBy]: MANAGED_BY, [LABELS.watchedBy]: DEFAULTS.manager },
        },
        spec: { channel: 'regular', modules: [{ name: 'sample' }] },
      },
    });
    await createKyma(ns, 'kyma-labels', [{ name: 'sample' }], {
      [LABELS.globalAccountId]: 'ga-1',
      [LABELS.subaccountId]: 'sa-1',
    });
    await manager.reconciler.reconcile(`${ns}/kyma-labels`);
    expect((await kymaStatus(ns, 'kyma-labels')).state).to.equal('Ready');

    expect(await labelsOf(skr, 'kyma', SKR_NS, DEFAULTS.skrKymaName)).to.include({
      [LABELS.managedBy]: 'kyma',
      [LABELS.watchedBy]: 'kyma',
      [LABELS.runtimeId]: 'kyma-labels',
      [LABELS.globalAccountId]: 'ga-1',
      [LABELS.subaccountId]: 'sa-1',
    });
    const core = skr.makeApiClient(CoreV1Api);
    expect((await core.readNamespace({ name: SKR_NS })).metadata?.labels).to.include({
      [LABELS.managedBy]: 'kyma',
      'istio-injection': 'enabled',
      'namespaces.warden.kyma-project.io/validate': 'enabled',
    });
    // What upstream's tooling selects finds them.
    const { group, version, plural } = skrKymaRef;
    const selected = (await custom(skr).listNamespacedCustomObject({
      group,
      version,
      plural,
      namespace: SKR_NS,
      labelSelector: `${LABELS.managedBy}=kyma`,
    })) as { items: { metadata: { name: string } }[] };
    expect(selected.items.map((item) => item.metadata.name)).to.deep.equal([DEFAULTS.skrKymaName]);
    const namespaces = await core.listNamespace({ labelSelector: `${LABELS.managedBy}=kyma` });
    expect(namespaces.items.map((item) => item.metadata?.name)).to.include(SKR_NS);

    // The agent's own objects keep its label, which it lists its catalog copies by.
    expect(await labelsOf(skr, 'moduleTemplate', SKR_NS, 'sample-1.0.0')).to.include({
      [LABELS.managedBy]: MANAGED_BY,
    });
    expect(
      (await kymaStatus(ns, 'kyma-labels')).conditions.find((c) => c['type'] === 'ModuleCatalog'),
    ).to.include({ status: 'True' });
  });

  it('offers in the SKR only the channels whose template the Kyma may see, and no ModuleReleaseMeta left without one', async function () {
    const beta = { [LABELS.beta]: 'true' };
    await catalogEntry(ns, 'sample', { regular: '1.0.0', fast: '1.1.0' }, { '1.1.0': beta });
    await catalogEntry(ns, 'trial', { regular: '0.1.0' }, { '0.1.0': beta });
    await createKyma(ns, 'kyma-channels', []);
    await manager.reconciler.reconcile(`${ns}/kyma-channels`);

    const channelsOf = async (module: string) =>
      ((await read(skr, 'moduleReleaseMeta', SKR_NS, module))?.['spec'] as { channels: Json[] } | undefined)
        ?.channels;
    expect(await channelsOf('sample')).to.deep.equal([{ channel: 'regular', version: '1.0.0' }]);
    expect(await channelsOf('trial')).to.equal(undefined);
    expect(await read(skr, 'moduleTemplate', SKR_NS, 'sample-1.1.0')).to.equal(undefined);

    // Labelled beta, the Kyma may use them all.
    await custom(kcp).patchNamespacedCustomObject(
      { ...kymaRef(ns, 'kyma-channels'), body: { metadata: { labels: beta } } },
      mergePatch,
    );
    await untilInWatchCache(
      async () =>
        (await custom(kcp).listNamespacedCustomObject({
          ...kymaList(ns),
          labelSelector: `${LABELS.beta}=true`,
          resourceVersion: '0',
        })) as { items: { metadata?: { name?: string } }[] },
      'kyma-channels',
    );
    await manager.reconciler.reconcile(`${ns}/kyma-channels`);
    expect(await channelsOf('sample')).to.deep.equal([
      { channel: 'regular', version: '1.0.0' },
      { channel: 'fast', version: '1.1.0' },
    ]);
    expect(await channelsOf('trial')).to.deep.equal([{ channel: 'regular', version: '0.1.0' }]);
  });
});
