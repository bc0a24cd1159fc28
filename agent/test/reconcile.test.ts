// Lifecycle reconciliation on real control planes: one KCP and two SKRs of a private environment (the SKR
// side always uses kyma-system/default, so these tests must not share SKRs with other suites). The reconciler
// talks to KCP as the shipped skr-agent ServiceAccount under manifests/kcp/rbac.yaml, not as system:masters.
import { readFile } from 'node:fs/promises';
import { expect } from 'chai';
import {
  ApiextensionsV1Api,
  CoreV1Api,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import { DEFAULTS, GROUP, KINDS, KYMA_FINALIZER, LABELS, MANAGED_BY, REQUEUE_MS } from '@skr-watcher/api';
import { freePort, startEnvironment, type Environment } from '@skr-watcher/testenv';
import { createClusterClient } from '@skr-watcher/kube';
import { createRegistry } from '@skr-watcher/telemetry';
import { kubeConfigAsAgent } from '../../test/support/kcp-rbac.js';
import { CRD_DIGEST_ANNOTATION, ensureSkrCrds } from '../src/reconcile/kyma/crds.js';
import { SKR_WEBHOOK_TLS_SECRET, tlsSecretFor } from '../src/registration/skr-resources.js';
import { moduleConfigName } from '../src/reconcile/index.js';
import { createManager, type Manager } from '../src/manager/index.js';
import { custom, getOrUndefined, kymaRef, untilCrdsServe, untilInWatchCache } from './support/planes.js';

const SKR_NS = DEFAULTS.skrNamespace;
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

type Json = Record<string, unknown>;

interface Planes {
  kcp: KubeConfig;
  skr1: KubeConfig;
  skr2: KubeConfig;
}

let env: Environment;
let planes: Planes;
let kcpCustom: ReturnType<typeof custom>;
let kcpCore: CoreV1Api;
let counter = 0;

const skrKymaRef = kymaRef(SKR_NS, DEFAULTS.skrKymaName);
const sampleRef = (name = 'sample') => ({
  group: GROUP,
  version: KINDS.sample.version,
  plural: KINDS.sample.plural,
  namespace: SKR_NS,
  name,
});

/** A fresh KCP namespace with the sample module's catalog and a kubeconfig Secret per given Kyma. */
async function kcpNamespace(): Promise<string> {
  counter += 1;
  const namespace = `rc-${process.pid}-${counter}`;
  await kcpCore.createNamespace({ body: { metadata: { name: namespace } } });
  await kcpCustom.createNamespacedCustomObject({
    group: GROUP,
    version: KINDS.moduleReleaseMeta.version,
    plural: KINDS.moduleReleaseMeta.plural,
    namespace,
    body: {
      apiVersion: `${GROUP}/${KINDS.moduleReleaseMeta.version}`,
      kind: KINDS.moduleReleaseMeta.kind,
      metadata: { name: 'sample', namespace },
      spec: { moduleName: 'sample', channels: [{ channel: 'regular', version: '1.0.0' }] },
    },
  });
  await kcpCustom.createNamespacedCustomObject({
    group: GROUP,
    version: KINDS.moduleTemplate.version,
    plural: KINDS.moduleTemplate.plural,
    namespace,
    body: {
      apiVersion: `${GROUP}/${KINDS.moduleTemplate.version}`,
      kind: KINDS.moduleTemplate.kind,
      metadata: { name: 'sample-1.0.0', namespace },
      spec: {
        moduleName: 'sample',
        version: '1.0.0',
        data: {
          apiVersion: `${GROUP}/${KINDS.sample.version}`,
          kind: KINDS.sample.kind,
          metadata: { name: 'sample', namespace: SKR_NS },
          spec: { replicas: 1, greeting: 'hello from 1.0.0' },
        },
      },
    },
  });
  return namespace;
}

async function kubeconfigSecret(namespace: string, kyma: string, kubeconfig: string): Promise<void> {
  const name = `kubeconfig-${kyma}`;
  await kcpCore.createNamespacedSecret({
    namespace,
    body: {
      metadata: { name, namespace, labels: { [LABELS.kymaName]: kyma } },
      data: { config: Buffer.from(kubeconfig).toString('base64') },
    },
  });
  await untilInWatchCache(() => kcpCore.listNamespacedSecret({ namespace, resourceVersion: '0' }), name);
}

async function createKyma(
  namespace: string,
  name: string,
  plane: 'skr1' | 'skr2',
  modules: Json[],
  labels: Json = {},
) {
  await kubeconfigSecret(namespace, name, await readFile(env.plane(plane).kubeconfigPath, 'utf8'));
  await kcpCustom.createNamespacedCustomObject({
    ...kymaRef(namespace, name),
    body: {
      apiVersion: `${GROUP}/${KINDS.kyma.version}`,
      kind: KINDS.kyma.kind,
      metadata: { name, namespace, labels: { [LABELS.runtimeId]: name, ...labels } },
      spec: { channel: 'regular', modules },
    },
  });
}

async function moduleConfig(namespace: string, kyma: string, module: string): Promise<Json | undefined> {
  return getOrUndefined(() =>
    kcpCustom.getNamespacedCustomObject({
      group: GROUP,
      version: KINDS.moduleConfig.version,
      plural: KINDS.moduleConfig.plural,
      namespace,
      name: moduleConfigName(kyma, module),
    }),
  );
}

async function kcpKyma(namespace: string, name: string): Promise<Json | undefined> {
  return getOrUndefined(() => kcpCustom.getNamespacedCustomObject(kymaRef(namespace, name)));
}

/** Leaves an SKR as a fresh one: no Kyma, no Sample, no ConfigMaps from SyncResources. */
async function wipeSkr(kc: KubeConfig): Promise<void> {
  const api = custom(kc);
  await getOrUndefined(() => api.deleteNamespacedCustomObject(skrKymaRef));
  const { group, version, plural, namespace } = sampleRef();
  const samples = (await getOrUndefined(() =>
    api.listNamespacedCustomObject({ group, version, plural, namespace }),
  )) as {
    items: { metadata: { name: string } }[];
  };
  for (const sample of samples.items) {
    await getOrUndefined(() => api.deleteNamespacedCustomObject(sampleRef(sample.metadata.name)));
  }
  const core = kc.makeApiClient(CoreV1Api);
  const maps = await core.listNamespacedConfigMap({ namespace: SKR_NS, labelSelector: LABELS.managedBy });
  for (const map of maps.items) {
    await getOrUndefined(() =>
      core.deleteNamespacedConfigMap({ namespace: SKR_NS, name: map.metadata!.name! }),
    );
  }
}

const syncRef = (namespace: string, name: string) => ({
  group: GROUP,
  version: KINDS.syncResource.version,
  plural: KINDS.syncResource.plural,
  namespace,
  name,
});

function configMapItem(
  name: string,
  strategy: string,
  configMap: string,
  data: Record<string, string>,
): Json {
  return {
    name,
    strategy,
    resource: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: configMap, namespace: SKR_NS }, data },
  };
}

async function createSyncResource(
  namespace: string,
  name: string,
  kyma: string,
  items: Json[],
): Promise<void> {
  await kcpCustom.createNamespacedCustomObject({
    ...syncRef(namespace, name),
    body: {
      apiVersion: `${GROUP}/${KINDS.syncResource.version}`,
      kind: KINDS.syncResource.kind,
      metadata: { name, namespace },
      spec: { kyma, items },
    },
  });
  const { group, version, plural } = syncRef(namespace, name);
  await untilInWatchCache(
    async () =>
      (await kcpCustom.listNamespacedCustomObject({
        group,
        version,
        plural,
        namespace,
        resourceVersion: '0',
      })) as {
        items: { metadata?: { name?: string } }[];
      },
    name,
  );
}

async function skrConfigMap(kc: KubeConfig, name: string) {
  return getOrUndefined(() =>
    kc.makeApiClient(CoreV1Api).readNamespacedConfigMap({ namespace: SKR_NS, name }),
  );
}

describe('lifecycle reconciliation (real KCP and two SKRs)', function () {
  this.timeout(120_000);
  let manager: Manager;

  before(async function () {
    env = await startEnvironment({ planes: ['kcp', 'skr1', 'skr2'] });
    planes = {
      kcp: env.plane('kcp').kubeConfig(),
      skr1: env.plane('skr1').kubeConfig(),
      skr2: env.plane('skr2').kubeConfig(),
    };
    kcpCustom = custom(planes.kcp);
    kcpCore = planes.kcp.makeApiClient(CoreV1Api);
    await untilCrdsServe([planes.kcp, planes.skr1, planes.skr2]);
    // The SKRs' kyma-system namespace is created by the reconciler when missing; make one SKR already have it.
    await planes.skr2.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: SKR_NS } } });
  });

  after(async function () {
    await env?.stop();
  });

  let ns: string;
  let registry: ReturnType<typeof createRegistry>;
  beforeEach(async function () {
    ns = await kcpNamespace();
    registry = createRegistry();
    manager = createManager({
      kcp: await kubeConfigAsAgent(planes.kcp, ns),
      namespace: ns,
      registry,
      skrTimeoutMs: 5_000,
    });
  });

  afterEach(async function () {
    await manager.close();
    await wipeSkr(planes.skr1);
    await wipeSkr(planes.skr2);
  });

  it('creates the SKR Kyma and Module CR, mirrors a Module CR edit into its ModuleConfig, and leaves the other SKR alone', async function () {
    await createKyma(ns, 'kyma-a', 'skr1', [{ name: 'sample' }]);
    await createKyma(ns, 'kyma-b', 'skr2', [{ name: 'sample' }]);

    expect(await manager.reconciler.reconcile(`${ns}/kyma-a`)).to.deep.equal({
      requeueAfterMs: REQUEUE_MS.Ready,
    });
    expect(await manager.reconciler.reconcile(`${ns}/kyma-b`)).to.deep.equal({
      requeueAfterMs: REQUEUE_MS.Ready,
    });

    const kymaA = (await kcpKyma(ns, 'kyma-a')) as { metadata: Json; status: Json };
    expect(kymaA.metadata['finalizers']).to.include(KYMA_FINALIZER);
    expect(kymaA.status['state']).to.equal('Ready');
    expect(kymaA.status['modules']).to.deep.include.members([
      {
        name: 'sample',
        channel: 'regular',
        version: '1.0.0',
        state: 'Ready',
        template: {
          apiVersion: `${GROUP}/${KINDS.moduleTemplate.version}`,
          kind: KINDS.moduleTemplate.kind,
          metadata: { name: 'sample-1.0.0', namespace: ns, generation: 1 },
        },
        resource: {
          apiVersion: `${GROUP}/${KINDS.sample.version}`,
          kind: KINDS.sample.kind,
          metadata: { name: 'sample', namespace: SKR_NS },
        },
        maintenance: false,
      },
    ]);
    expect(kymaA.status['activeChannel']).to.equal('regular');
    const skr1Kyma = (await custom(planes.skr1).getNamespacedCustomObject(skrKymaRef)) as {
      spec: Json;
      status: Json;
    };
    // The CRD's defaults (upstream's) are part of the spec the SKR Kyma is created from.
    expect(skr1Kyma.spec['modules']).to.deep.equal([
      { name: 'sample', managed: true, customResourcePolicy: 'CreateAndDelete' },
    ]);
    expect(skr1Kyma.status['state']).to.equal('Ready');

    const sample = (await custom(planes.skr1).getNamespacedCustomObject(sampleRef())) as {
      metadata: { resourceVersion: string };
      spec: Json;
    };
    expect(sample.spec).to.deep.equal({ replicas: 1, greeting: 'hello from 1.0.0' });
    const configA = (await moduleConfig(ns, 'kyma-a', 'sample')) as {
      metadata: Json;
      spec: Json;
      status: Json;
    };
    expect(configA.metadata['labels']).to.include({
      [LABELS.kymaName]: 'kyma-a',
      [LABELS.moduleName]: 'sample',
    });
    expect(configA.spec).to.deep.equal({
      kyma: 'kyma-a',
      module: 'sample',
      resource: {
        apiVersion: `${GROUP}/v1alpha1`,
        kind: 'Sample',
        metadata: { name: 'sample', namespace: SKR_NS },
        spec: { replicas: 1, greeting: 'hello from 1.0.0' },
      },
    });
    expect(configA.status['sourceResourceVersion']).to.equal(sample.metadata.resourceVersion);
    const managers = (configA.metadata['managedFields'] as { manager: string }[]).map((f) => f.manager);
    expect(managers).to.include('skr-watcher-agent');
    const configB = (await moduleConfig(ns, 'kyma-b', 'sample')) as { metadata: { resourceVersion: string } };

    // The user edits the Module CR in SKR 1.
    const edited = (await custom(planes.skr1).patchNamespacedCustomObject(
      { ...sampleRef(), body: { spec: { replicas: 3, greeting: 'edited' } } },
      mergePatch,
    )) as { metadata: { resourceVersion: string } };
    await manager.reconciler.reconcile(`${ns}/kyma-a`);

    const mirrored = (await moduleConfig(ns, 'kyma-a', 'sample')) as {
      spec: { resource: Json };
      status: Json;
    };
    expect(mirrored.spec.resource['spec']).to.deep.equal({ replicas: 3, greeting: 'edited' });
    expect(mirrored.status['sourceResourceVersion']).to.equal(edited.metadata.resourceVersion);
    const untouched = (await moduleConfig(ns, 'kyma-b', 'sample')) as {
      metadata: { resourceVersion: string };
    };
    expect(untouched.metadata.resourceVersion).to.equal(configB.metadata.resourceVersion);

    // A second pass with nothing changed writes nothing.
    const before = (await moduleConfig(ns, 'kyma-a', 'sample')) as { metadata: { resourceVersion: string } };
    const kymaBefore = (await kcpKyma(ns, 'kyma-a')) as { metadata: { resourceVersion: string } };
    await manager.reconciler.reconcile(`${ns}/kyma-a`);
    const after = (await moduleConfig(ns, 'kyma-a', 'sample')) as { metadata: { resourceVersion: string } };
    const kymaAfter = (await kcpKyma(ns, 'kyma-a')) as { metadata: { resourceVersion: string } };
    expect(after.metadata.resourceVersion).to.equal(before.metadata.resourceVersion);
    expect(kymaAfter.metadata.resourceVersion).to.equal(kymaBefore.metadata.resourceVersion);

    const metrics = await registry.metrics();
    expect(metrics).to.match(/^skr_agent_reconcile_total\{result="ready"\} 4$/m);
    expect(metrics).to.match(/^skr_agent_reconcile_duration_seconds_count\{result="ready"\} 4$/m);
    expect(metrics).to.match(/^skr_agent_skr_clients 2$/m);
  });

  it('disabling a module in the SKR Kyma removes its ModuleConfig and the Module CR the agent created', async function () {
    await createKyma(ns, 'kyma-d', 'skr1', [{ name: 'sample' }]);
    await manager.reconciler.reconcile(`${ns}/kyma-d`);
    expect(await moduleConfig(ns, 'kyma-d', 'sample')).to.not.equal(undefined);

    await custom(planes.skr1).patchNamespacedCustomObject(
      { ...skrKymaRef, body: { spec: { modules: [] } } },
      mergePatch,
    );
    await manager.reconciler.reconcile(`${ns}/kyma-d`);

    expect(await moduleConfig(ns, 'kyma-d', 'sample')).to.equal(undefined);
    expect(await getOrUndefined(() => custom(planes.skr1).getNamespacedCustomObject(sampleRef()))).to.equal(
      undefined,
    );
    const kyma = (await kcpKyma(ns, 'kyma-d')) as { status: Json };
    expect(kyma.status['modules']).to.deep.equal([]);
    expect(kyma.status['state']).to.equal('Ready');
  });

  it('a missing template puts that module in Error with a reason, records an Event, and does not crash', async function () {
    await createKyma(ns, 'kyma-m', 'skr1', [{ name: 'sample' }, { name: 'nosuch', version: '9.9.9' }]);
    expect(await manager.reconciler.reconcile(`${ns}/kyma-m`)).to.deep.equal({
      requeueAfterMs: REQUEUE_MS.Error,
    });

    const kyma = (await kcpKyma(ns, 'kyma-m')) as {
      status: { state: string; modules: Json[]; conditions: Json[] };
    };
    expect(kyma.status.state).to.equal('Error');
    const broken = kyma.status.modules.find((m) => m['name'] === 'nosuch');
    expect(broken?.['state']).to.equal('Error');
    expect(broken?.['message']).to.equal(
      'failed to get module template: ModuleTemplate.operator.kyma-project.io "nosuch-9.9.9" not found',
    );
    expect(kyma.status.modules.find((m) => m['name'] === 'sample')?.['state']).to.equal('Ready');
    expect(await moduleConfig(ns, 'kyma-m', 'sample')).to.not.equal(undefined);
    const condition = kyma.status.conditions.find((c) => c['type'] === 'Modules');
    expect(condition).to.include({ status: 'False', reason: 'ModulesNotReady' });

    const events = await kcpCore.listNamespacedEvent({ namespace: ns });
    const event = events.items.find(
      (e) => e.involvedObject.name === 'kyma-m' && e.reason === 'ReconcileFailed',
    );
    expect(event?.type).to.equal('Warning');
    expect(event?.message).to.match(/nosuch/);
  });

  it('skip-reconciliation=true pauses a Kyma: no finalizer, nothing in the SKR', async function () {
    await createKyma(ns, 'kyma-p', 'skr1', [{ name: 'sample' }], { [LABELS.skipReconciliation]: 'true' });
    expect(await manager.reconciler.reconcile(`${ns}/kyma-p`)).to.deep.equal({});
    const kyma = (await kcpKyma(ns, 'kyma-p')) as { metadata: Json; status?: Json };
    expect(kyma.metadata['finalizers'] ?? []).to.not.include(KYMA_FINALIZER);
    expect(kyma.status).to.equal(undefined);
    expect(await getOrUndefined(() => custom(planes.skr1).getNamespacedCustomObject(skrKymaRef))).to.equal(
      undefined,
    );

    // Removing the label resumes it.
    await kcpCustom.patchNamespacedCustomObject(
      { ...kymaRef(ns, 'kyma-p'), body: { metadata: { labels: { [LABELS.skipReconciliation]: null } } } },
      mergePatch,
    );
    await manager.reconciler.reconcile(`${ns}/kyma-p`);
    expect(
      await getOrUndefined(() => custom(planes.skr1).getNamespacedCustomObject(skrKymaRef)),
    ).to.not.equal(undefined);
  });

  it('a reconcile of a Kyma that does not exist is a no-op', async function () {
    expect(await manager.reconciler.reconcile(`${ns}/ghost`)).to.deep.equal({});
  });

  it('a missing kubeconfig Secret fails the reconcile (back off) with status and Event', async function () {
    await kcpCustom.createNamespacedCustomObject({
      ...kymaRef(ns, 'kyma-n'),
      body: {
        apiVersion: `${GROUP}/${KINDS.kyma.version}`,
        kind: KINDS.kyma.kind,
        metadata: { name: 'kyma-n', namespace: ns },
        spec: { modules: [] },
      },
    });
    let failure: unknown;
    await manager.reconciler.reconcile(`${ns}/kyma-n`).catch((error: unknown) => (failure = error));
    expect(String(failure)).to.match(
      /reconcile Kyma .*kyma-n: no Secret in .* labelled operator.kyma-project.io\/kyma-name=kyma-n/,
    );
    const kyma = (await kcpKyma(ns, 'kyma-n')) as { status: { state: string; conditions: Json[] } };
    expect(kyma.status.state).to.equal('Error');
    expect(kyma.status.conditions.find((c) => c['type'] === 'SKRConnected')).to.include({
      status: 'False',
      reason: 'KubeconfigMissing',
    });
    const events = await kcpCore.listNamespacedEvent({ namespace: ns });
    expect(
      events.items.some((e) => e.reason === 'KubeconfigMissing' && e.involvedObject.name === 'kyma-n'),
    ).to.equal(true);
    // The same failure again folds into that Event: the agent reads it back (`get` on Events) and bumps its count.
    await manager.reconciler.reconcile(`${ns}/kyma-n`).catch(() => undefined);
    const repeated = await kcpCore.listNamespacedEvent({ namespace: ns });
    expect(
      repeated.items.find((e) => e.reason === 'KubeconfigMissing' && e.involvedObject.name === 'kyma-n')
        ?.count,
    ).to.equal(2);

    // Deleting it does not wait for an SKR nobody can reach: the SKR side is skipped, with an Event.
    await kcpCustom.deleteNamespacedCustomObject(kymaRef(ns, 'kyma-n'));
    expect(await manager.reconciler.reconcile(`${ns}/kyma-n`)).to.deep.equal({});
    expect(await kcpKyma(ns, 'kyma-n')).to.equal(undefined);
    const after = await kcpCore.listNamespacedEvent({ namespace: ns });
    expect(
      after.items.some((e) => e.reason === 'SKRCleanupSkipped' && e.involvedObject.name === 'kyma-n'),
    ).to.equal(true);
  });

  it('applies SyncResource items by strategy: drift reverted for CreateAndSync, kept for CreateAndIgnore, dropped items removed', async function () {
    await createKyma(ns, 'kyma-s', 'skr1', []);
    const skrCore = planes.skr1.makeApiClient(CoreV1Api);
    await manager.reconciler.reconcile(`${ns}/kyma-s`); // creates kyma-system in the SKR
    await skrCore.createNamespacedConfigMap({
      namespace: SKR_NS,
      body: { metadata: { name: 'cm-unwanted' }, data: { a: '1' } },
    });
    await createSyncResource(ns, 'sync-s', 'kyma-s', [
      configMapItem('synced', 'CreateAndSync', 'cm-synced', { a: '1' }),
      configMapItem('ignored', 'CreateAndIgnore', 'cm-ignored', { a: '1' }),
      configMapItem('unwanted', 'Delete', 'cm-unwanted', {}),
    ]);
    expect(await manager.reconciler.reconcile(`${ns}/kyma-s`)).to.deep.equal({
      requeueAfterMs: REQUEUE_MS.Ready,
    });

    expect((await skrConfigMap(planes.skr1, 'cm-synced'))?.data).to.deep.equal({ a: '1' });
    expect((await skrConfigMap(planes.skr1, 'cm-ignored'))?.data).to.deep.equal({ a: '1' });
    expect(await skrConfigMap(planes.skr1, 'cm-unwanted')).to.equal(undefined);
    const sync = (await kcpCustom.getNamespacedCustomObject(syncRef(ns, 'sync-s'))) as {
      metadata: { finalizers?: string[] };
      status: { state: string; items: Json[] };
    };
    expect(sync.metadata.finalizers).to.include(KYMA_FINALIZER);
    expect(sync.status.state).to.equal('Ready');
    expect(sync.status.items.map((item) => [item['name'], item['state']])).to.deep.equal([
      ['synced', 'Ready'],
      ['ignored', 'Ready'],
      ['unwanted', 'Ready'],
    ]);
    expect(sync.status.items[0]?.['applied']).to.deep.equal({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      name: 'cm-synced',
      namespace: SKR_NS,
    });

    // Hand edits in the SKR.
    for (const name of ['cm-synced', 'cm-ignored']) {
      await skrCore.patchNamespacedConfigMap(
        { namespace: SKR_NS, name, body: { data: { a: '2' } } },
        mergePatch,
      );
    }
    await manager.reconciler.reconcile(`${ns}/kyma-s`);
    expect((await skrConfigMap(planes.skr1, 'cm-synced'))?.data).to.deep.equal({ a: '1' });
    expect((await skrConfigMap(planes.skr1, 'cm-ignored'))?.data).to.deep.equal({ a: '2' });

    // Dropping an item removes its object from the SKR; renaming an item keeps its object.
    await kcpCustom.patchNamespacedCustomObject(
      {
        ...syncRef(ns, 'sync-s'),
        body: { spec: { items: [configMapItem('renamed', 'CreateAndIgnore', 'cm-ignored', { a: '1' })] } },
      },
      mergePatch,
    );
    await manager.reconciler.reconcile(`${ns}/kyma-s`);
    expect(await skrConfigMap(planes.skr1, 'cm-synced')).to.equal(undefined);
    expect(await skrConfigMap(planes.skr1, 'cm-ignored')).to.not.equal(undefined);
    const after = (await kcpCustom.getNamespacedCustomObject(syncRef(ns, 'sync-s'))) as {
      status: { items: Json[] };
    };
    expect(after.status.items.map((item) => item['name'])).to.deep.equal(['renamed']);

    // Deleting the SyncResource removes what it applied, then lets it go.
    await kcpCustom.deleteNamespacedCustomObject(syncRef(ns, 'sync-s'));
    await manager.reconciler.reconcile(`${ns}/kyma-s`);
    expect(await skrConfigMap(planes.skr1, 'cm-ignored')).to.equal(undefined);
    expect(await getOrUndefined(() => kcpCustom.getNamespacedCustomObject(syncRef(ns, 'sync-s')))).to.equal(
      undefined,
    );
  });

  it('a bad SyncResource item fails that item only', async function () {
    await createKyma(ns, 'kyma-b', 'skr1', []);
    await manager.reconciler.reconcile(`${ns}/kyma-b`);
    await createSyncResource(ns, 'sync-b', 'kyma-b', [
      configMapItem('good', 'CreateAndSync', 'cm-good', { a: '1' }),
      {
        name: 'unknown-kind',
        strategy: 'CreateAndSync',
        resource: {
          apiVersion: 'example.com/v1',
          kind: 'Nothing',
          metadata: { name: 'x', namespace: SKR_NS },
        },
      },
    ]);
    expect(await manager.reconciler.reconcile(`${ns}/kyma-b`)).to.deep.equal({
      requeueAfterMs: REQUEUE_MS.Error,
    });
    expect(await skrConfigMap(planes.skr1, 'cm-good')).to.not.equal(undefined);
    const sync = (await kcpCustom.getNamespacedCustomObject(syncRef(ns, 'sync-b'))) as {
      status: { state: string; items: Json[] };
    };
    expect(sync.status.state).to.equal('Error');
    expect(sync.status.items[1]).to.include({ name: 'unknown-kind', state: 'Error' });
    expect(sync.status.items[1]?.['message']).to.match(/example.com\/v1.*Nothing|Nothing/);
    const kyma = (await kcpKyma(ns, 'kyma-b')) as { status: { conditions: Json[] } };
    expect(kyma.status.conditions.find((c) => c['type'] === 'SyncResourcesApplied')).to.include({
      status: 'False',
    });
  });

  it('refuses SyncResource items outside the allow-list of kinds and namespaces, item by item', async function () {
    await createKyma(ns, 'kyma-p', 'skr1', []);
    await manager.reconciler.reconcile(`${ns}/kyma-p`);
    const skrCore = planes.skr1.makeApiClient(CoreV1Api);
    const guarded = `guarded-${counter}`;
    await skrCore.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: guarded } } });
    const role = `sync-escalation-${counter}`;
    await createSyncResource(ns, 'sync-p', 'kyma-p', [
      configMapItem('allowed', 'CreateAndSync', 'cm-allowed', { a: '1' }),
      {
        name: 'cluster-role',
        strategy: 'CreateAndSync',
        resource: {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'ClusterRole',
          metadata: { name: role },
          rules: [{ apiGroups: ['*'], resources: ['*'], verbs: ['*'] }],
        },
      },
      {
        name: 'other-namespace',
        strategy: 'Delete',
        resource: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: guarded, namespace: 'default' } },
      },
    ]);
    await manager.reconciler.reconcile(`${ns}/kyma-p`);
    expect(await skrConfigMap(planes.skr1, 'cm-allowed')).to.not.equal(undefined);
    const roles = await planes.skr1
      .makeApiClient(RbacAuthorizationV1Api)
      .listClusterRole({ fieldSelector: `metadata.name=${role}` });
    expect(roles.items, 'a SyncResource created a ClusterRole').to.have.length(0);
    expect(
      await getOrUndefined(() => skrCore.readNamespacedConfigMap({ namespace: 'default', name: guarded })),
    ).to.not.equal(undefined);
    const sync = (await kcpCustom.getNamespacedCustomObject(syncRef(ns, 'sync-p'))) as {
      status: { state: string; items: { name: string; state: string; message?: string }[] };
    };
    expect(sync.status.items.map((item) => [item.name, item.state])).to.deep.equal([
      ['allowed', 'Ready'],
      ['cluster-role', 'Error'],
      ['other-namespace', 'Error'],
    ]);
    expect(sync.status.items[1]?.message).to.include(
      'kind ClusterRole.rbac.authorization.k8s.io is not allowed',
    );
    expect(sync.status.items[2]?.message).to.include(`may touch namespaces ${SKR_NS} only; refused`);
    await skrCore.deleteNamespacedConfigMap({ namespace: 'default', name: guarded });
  });

  it('refuses SyncResource items naming what the agent runs in the SKR (webhook Secret, SKR Kyma, Module CR) whatever the allow-list, and never deletes them', async function () {
    await manager.close();
    manager = createManager({
      kcp: await kubeConfigAsAgent(planes.kcp, ns),
      namespace: ns,
      skrTimeoutMs: 5_000,
      // An allow-list wide enough to name every one of them.
      syncResourcePolicy: {
        kinds: ['ConfigMap', 'Secret', `Kyma.${GROUP}`, `Sample.${GROUP}`],
        namespaces: [SKR_NS],
      },
    });
    await createKyma(ns, 'kyma-o', 'skr1', [{ name: 'sample' }]);
    await manager.reconciler.reconcile(`${ns}/kyma-o`);
    const skrCore = planes.skr1.makeApiClient(CoreV1Api);
    // The webhook's TLS Secret as the registration writes it.
    const webhookSecret = tlsSecretFor({ caBundlePem: 'ca', certPem: 'cert', keyPem: 'key' });
    await skrCore.createNamespacedSecret({ namespace: SKR_NS, body: webhookSecret });
    try {
      await createSyncResource(ns, 'sync-o', 'kyma-o', [
        {
          name: 'webhook-secret',
          strategy: 'CreateAndSync',
          resource: {
            apiVersion: 'v1',
            kind: 'Secret',
            metadata: { name: SKR_WEBHOOK_TLS_SECRET, namespace: SKR_NS },
            data: { 'tls.key': Buffer.from('attacker').toString('base64') },
          },
        },
        {
          name: 'skr-kyma',
          strategy: 'CreateAndSync',
          resource: {
            apiVersion: `${GROUP}/${KINDS.kyma.version}`,
            kind: KINDS.kyma.kind,
            metadata: { name: DEFAULTS.skrKymaName, namespace: SKR_NS },
            spec: { channel: 'fast' },
          },
        },
        {
          name: 'module-cr',
          strategy: 'CreateAndSync',
          resource: {
            apiVersion: `${GROUP}/${KINDS.sample.version}`,
            kind: KINDS.sample.kind,
            metadata: { name: 'sample', namespace: SKR_NS },
            spec: { greeting: 'hijacked' },
          },
        },
        configMapItem('allowed', 'CreateAndSync', 'cm-owned-test', { a: '1' }),
      ]);
      await manager.reconciler.reconcile(`${ns}/kyma-o`);
      const secret = await skrCore.readNamespacedSecret({ namespace: SKR_NS, name: SKR_WEBHOOK_TLS_SECRET });
      expect(secret.data, 'the webhook Secret was overwritten').to.deep.equal(webhookSecret.data);
      const skrKyma = (await custom(planes.skr1).getNamespacedCustomObject(skrKymaRef)) as { spec: Json };
      expect(skrKyma.spec['channel']).to.not.equal('fast');
      const sample = (await custom(planes.skr1).getNamespacedCustomObject(sampleRef())) as { spec: Json };
      expect(sample.spec['greeting']).to.not.equal('hijacked');
      expect(await skrConfigMap(planes.skr1, 'cm-owned-test')).to.not.equal(undefined);
      const sync = (await kcpCustom.getNamespacedCustomObject(syncRef(ns, 'sync-o'))) as {
        status: { items: { name: string; state: string; message?: string }[] };
      };
      expect(sync.status.items.map((item) => [item.name, item.state])).to.deep.equal([
        ['webhook-secret', 'Error'],
        ['skr-kyma', 'Error'],
        ['module-cr', 'Error'],
        ['allowed', 'Ready'],
      ]);
      expect(sync.status.items[0]?.message).to.equal(
        `Secret ${SKR_NS}/${SKR_WEBHOOK_TLS_SECRET} is the SKR webhook's Secret, which the agent keeps itself; no module or SyncResource may touch it; refused`,
      );
      expect(sync.status.items[1]?.message).to.include('is the SKR Kyma, which the agent keeps itself');
      expect(sync.status.items[2]?.message).to.include(
        "is a module's Module CR, which the agent keeps itself",
      );

      // A status that claims the SyncResource applied the webhook Secret (whoever can write it): deleting the
      // SyncResource removes what it applied, never the Secret.
      const forged = { apiVersion: 'v1', kind: 'Secret', name: SKR_WEBHOOK_TLS_SECRET, namespace: SKR_NS };
      await kcpCustom.patchNamespacedCustomObjectStatus(
        {
          ...syncRef(ns, 'sync-o'),
          body: {
            status: {
              items: [...sync.status.items, { name: 'forged', state: 'Ready', applied: forged }],
              synced: [
                { group: '', version: 'v1', kind: 'Secret', name: SKR_WEBHOOK_TLS_SECRET, namespace: SKR_NS },
              ],
            },
          },
        },
        mergePatch,
      );
      await kcpCustom.deleteNamespacedCustomObject(syncRef(ns, 'sync-o'));
      await manager.reconciler.reconcile(`${ns}/kyma-o`);
      expect(await getOrUndefined(() => kcpCustom.getNamespacedCustomObject(syncRef(ns, 'sync-o')))).to.equal(
        undefined,
      );
      expect(await skrConfigMap(planes.skr1, 'cm-owned-test')).to.equal(undefined);
      expect(
        await getOrUndefined(() =>
          skrCore.readNamespacedSecret({ namespace: SKR_NS, name: SKR_WEBHOOK_TLS_SECRET }),
        ),
        'deleting the SyncResource deleted the webhook Secret',
      ).to.not.equal(undefined);
    } finally {
      await getOrUndefined(() =>
        skrCore.deleteNamespacedSecret({ namespace: SKR_NS, name: SKR_WEBHOOK_TLS_SECRET }),
      );
    }
  });

  it('refuses a SyncResource an object another SyncResource holds, and a service-account-token Secret; deleting it deletes neither', async function () {
    await manager.close();
    manager = createManager({
      kcp: await kubeConfigAsAgent(planes.kcp, ns),
      namespace: ns,
      skrTimeoutMs: 5_000,
      syncResourcePolicy: { kinds: ['ConfigMap', 'Secret'], namespaces: [SKR_NS] },
    });
    await createKyma(ns, 'kyma-h', 'skr1', [{ name: 'sample' }]);
    await manager.reconciler.reconcile(`${ns}/kyma-h`);
    await createSyncResource(ns, 'sync-first', 'kyma-h', [
      configMapItem('shared', 'CreateAndSync', 'cm-held', { holder: 'first' }),
    ]);
    await manager.reconciler.reconcile(`${ns}/kyma-h`);
    const held = await skrConfigMap(planes.skr1, 'cm-held');
    expect(held?.data).to.deep.equal({ holder: 'first' });
    await createSyncResource(ns, 'sync-second', 'kyma-h', [
      configMapItem('shared', 'CreateAndSync', 'cm-held', { holder: 'second' }),
      {
        name: 'token',
        strategy: 'CreateAndSync',
        resource: {
          apiVersion: 'v1',
          kind: 'Secret',
          type: 'kubernetes.io/service-account-token',
          metadata: {
            name: 'minted',
            namespace: SKR_NS,
            annotations: { 'kubernetes.io/service-account.name': 'default' },
          },
        },
      },
    ]);
    await manager.reconciler.reconcile(`${ns}/kyma-h`);
    expect((await skrConfigMap(planes.skr1, 'cm-held'))?.data).to.deep.equal({ holder: 'first' });
    const second = (await kcpCustom.getNamespacedCustomObject(syncRef(ns, 'sync-second'))) as {
      status: { items: { name: string; state: string; message?: string }[] };
    };
    expect(second.status.items.map((item) => [item.name, item.state])).to.deep.equal([
      ['shared', 'Error'],
      ['token', 'Error'],
    ]);
    expect(second.status.items[0]?.message).to.include(`is held by SyncResource ${ns}/sync-first`);
    expect(second.status.items[1]?.message).to.include('service-account-token');
    const skrCore = planes.skr1.makeApiClient(CoreV1Api);
    expect(
      await getOrUndefined(() => skrCore.readNamespacedSecret({ namespace: SKR_NS, name: 'minted' })),
    ).to.equal(undefined);

    await kcpCustom.deleteNamespacedCustomObject(syncRef(ns, 'sync-second'));
    await manager.reconciler.reconcile(`${ns}/kyma-h`);
    expect(
      await getOrUndefined(() => kcpCustom.getNamespacedCustomObject(syncRef(ns, 'sync-second'))),
    ).to.equal(undefined);
    const after = await skrConfigMap(planes.skr1, 'cm-held');
    expect(after?.metadata?.uid).to.equal(held?.metadata?.uid);
    expect(after?.data).to.deep.equal({ holder: 'first' });
  });

  it('deleting a Kyma leaves nothing of it in KCP or its SKR', async function () {
    await createKyma(ns, 'kyma-x', 'skr2', [{ name: 'sample' }]);
    await manager.reconciler.reconcile(`${ns}/kyma-x`);
    await createSyncResource(ns, 'sync-x', 'kyma-x', [
      configMapItem('c', 'CreateAndSync', 'cm-x', { a: '1' }),
    ]);
    await manager.reconciler.reconcile(`${ns}/kyma-x`);
    expect(await skrConfigMap(planes.skr2, 'cm-x')).to.not.equal(undefined);
    expect(await moduleConfig(ns, 'kyma-x', 'sample')).to.not.equal(undefined);

    await kcpCustom.deleteNamespacedCustomObject(kymaRef(ns, 'kyma-x'));
    expect(await manager.reconciler.reconcile(`${ns}/kyma-x`)).to.deep.equal({});

    expect(await kcpKyma(ns, 'kyma-x')).to.equal(undefined);
    const configs = (await kcpCustom.listNamespacedCustomObject({
      group: GROUP,
      version: KINDS.moduleConfig.version,
      plural: KINDS.moduleConfig.plural,
      namespace: ns,
      labelSelector: `${LABELS.kymaName}=kyma-x`,
    })) as { items: unknown[] };
    expect(configs.items).to.have.length(0);
    expect(await getOrUndefined(() => custom(planes.skr2).getNamespacedCustomObject(skrKymaRef))).to.equal(
      undefined,
    );
    expect(await getOrUndefined(() => custom(planes.skr2).getNamespacedCustomObject(sampleRef()))).to.equal(
      undefined,
    );
    expect(await skrConfigMap(planes.skr2, 'cm-x')).to.equal(undefined);
    // The SyncResource belongs to its module manager: it stays, without our finalizer and applied records.
    const sync = (await kcpCustom.getNamespacedCustomObject(syncRef(ns, 'sync-x'))) as {
      metadata: { finalizers?: string[] };
      status: { items: unknown[] };
    };
    expect(sync.metadata.finalizers ?? []).to.not.include(KYMA_FINALIZER);
    expect(sync.status.items).to.deep.equal([]);
    // A second reconcile of the gone Kyma is a no-op.
    expect(await manager.reconciler.reconcile(`${ns}/kyma-x`)).to.deep.equal({});
  });

  it('deletion removes a ModuleConfig that the watch cache has not delivered yet, and its Module CR', async function () {
    await manager.close();
    manager = createManager({
      kcp: await kubeConfigAsAgent(planes.kcp, ns),
      namespace: ns,
      // A cache that lags behind the last pass's writes: it holds none of the Kyma's ModuleConfigs yet.
      caches: {
        moduleTemplates: () => undefined,
        moduleReleaseMetas: () => undefined,
        watchers: () => undefined,
        moduleConfigs: () => [],
      },
    });
    await createKyma(ns, 'kyma-l', 'skr1', [{ name: 'sample' }]);
    await manager.reconciler.reconcile(`${ns}/kyma-l`);
    expect(await moduleConfig(ns, 'kyma-l', 'sample')).to.not.equal(undefined);

    await kcpCustom.deleteNamespacedCustomObject(kymaRef(ns, 'kyma-l'));
    expect(await manager.reconciler.reconcile(`${ns}/kyma-l`)).to.deep.equal({});
    expect(await kcpKyma(ns, 'kyma-l')).to.equal(undefined);
    expect(await moduleConfig(ns, 'kyma-l', 'sample')).to.equal(undefined);
    expect(await getOrUndefined(() => custom(planes.skr1).getNamespacedCustomObject(sampleRef()))).to.equal(
      undefined,
    );
  });

  it('deletion with an unreachable SKR retries until deletionTimeoutMs, then records an Event and lets the Kyma go', async function () {
    let now = Date.now();
    await manager.close();
    manager = createManager({
      kcp: await kubeConfigAsAgent(planes.kcp, ns),
      namespace: ns,
      skrTimeoutMs: 1_000,
      deletionTimeoutMs: 60_000,
      clock: () => new Date(now),
    });
    const port = await freePort(); // nothing listens there
    const kubeconfig = (await readFile(env.plane('skr1').kubeconfigPath, 'utf8')).replace(
      /server: https:\/\/127\.0\.0\.1:\d+/,
      `server: https://127.0.0.1:${port}`,
    );
    await kubeconfigSecret(ns, 'kyma-u', kubeconfig);
    await kcpCustom.createNamespacedCustomObject({
      ...kymaRef(ns, 'kyma-u'),
      body: {
        apiVersion: `${GROUP}/${KINDS.kyma.version}`,
        kind: KINDS.kyma.kind,
        metadata: { name: 'kyma-u', namespace: ns },
        spec: { modules: [] },
      },
    });
    let failure: unknown;
    await manager.reconciler.reconcile(`${ns}/kyma-u`).catch((error: unknown) => (failure = error));
    expect(failure).to.be.instanceOf(Error);
    let kyma = (await kcpKyma(ns, 'kyma-u')) as {
      metadata: { finalizers: string[] };
      status: { conditions: Json[] };
    };
    expect(kyma.metadata.finalizers).to.include(KYMA_FINALIZER);
    expect(kyma.status.conditions.find((c) => c['type'] === 'SKRConnected')).to.include({
      reason: 'SKRUnreachable',
    });

    await kcpCustom.deleteNamespacedCustomObject(kymaRef(ns, 'kyma-u'));
    now = Date.now();
    failure = undefined;
    await manager.reconciler.reconcile(`${ns}/kyma-u`).catch((error: unknown) => (failure = error));
    expect(String(failure)).to.match(/SKR cleanup failed \(retrying\)/);
    kyma = (await kcpKyma(ns, 'kyma-u')) as typeof kyma;
    expect(kyma.metadata.finalizers).to.include(KYMA_FINALIZER);

    now = Date.now() + 61_000;
    expect(await manager.reconciler.reconcile(`${ns}/kyma-u`)).to.deep.equal({});
    expect(await kcpKyma(ns, 'kyma-u')).to.equal(undefined);
    const events = await kcpCore.listNamespacedEvent({ namespace: ns });
    expect(
      events.items.some((e) => e.reason === 'SKRCleanupAbandoned' && e.involvedObject.name === 'kyma-u'),
    ).to.equal(true);
  });

  it('resolves a module channel over the Kyma channel, and a pinned version without the release meta', async function () {
    await kcpCustom.patchNamespacedCustomObject(
      {
        group: GROUP,
        version: KINDS.moduleReleaseMeta.version,
        plural: KINDS.moduleReleaseMeta.plural,
        namespace: ns,
        name: 'sample',
        body: {
          spec: {
            channels: [
              { channel: 'regular', version: '1.0.0' },
              { channel: 'fast', version: '1.1.0' },
            ],
          },
        },
      },
      mergePatch,
    );
    await kcpCustom.createNamespacedCustomObject({
      group: GROUP,
      version: KINDS.moduleTemplate.version,
      plural: KINDS.moduleTemplate.plural,
      namespace: ns,
      body: {
        apiVersion: `${GROUP}/${KINDS.moduleTemplate.version}`,
        kind: KINDS.moduleTemplate.kind,
        metadata: { name: 'sample-1.1.0', namespace: ns },
        spec: {
          moduleName: 'sample',
          version: '1.1.0',
          data: {
            apiVersion: `${GROUP}/${KINDS.sample.version}`,
            kind: KINDS.sample.kind,
            metadata: { name: 'sample', namespace: SKR_NS },
            spec: { replicas: 1, greeting: 'hello from 1.1.0' },
          },
        },
      },
    });
    await createKyma(ns, 'kyma-c', 'skr1', [{ name: 'sample', channel: 'fast' }]);
    await manager.reconciler.reconcile(`${ns}/kyma-c`);
    let kyma = (await kcpKyma(ns, 'kyma-c')) as { status: { modules: Json[] } };
    expect(kyma.status.modules[0]).to.include({ channel: 'fast', version: '1.1.0' });
    expect(kyma.status.modules[0]?.['template']).to.nested.include({ 'metadata.name': 'sample-1.1.0' });
    const sample = (await custom(planes.skr1).getNamespacedCustomObject(sampleRef())) as { spec: Json };
    expect(sample.spec['greeting']).to.equal('hello from 1.1.0');

    // A pinned version wins over channels; an unknown channel fails the module.
    await custom(planes.skr1).patchNamespacedCustomObject(
      { ...skrKymaRef, body: { spec: { modules: [{ name: 'sample', version: '1.0.0' }] } } },
      mergePatch,
    );
    await manager.reconciler.reconcile(`${ns}/kyma-c`);
    kyma = (await kcpKyma(ns, 'kyma-c')) as typeof kyma;
    expect(kyma.status.modules[0]).to.include({ version: '1.0.0', state: 'Ready' });
    expect(kyma.status.modules[0]?.['template']).to.nested.include({ 'metadata.name': 'sample-1.0.0' });
    expect(kyma.status.modules[0]).to.not.have.property('channel');

    await custom(planes.skr1).patchNamespacedCustomObject(
      { ...skrKymaRef, body: { spec: { modules: [{ name: 'sample', channel: 'nightly' }] } } },
      mergePatch,
    );
    await manager.reconciler.reconcile(`${ns}/kyma-c`);
    kyma = (await kcpKyma(ns, 'kyma-c')) as typeof kyma;
    expect(kyma.status.modules[0]).to.include({ state: 'Error' });
    expect(kyma.status.modules[0]?.['message']).to.match(/^ChannelNotFound: .* has no channel nightly/);
  });

  it('answers with the requeue interval configured for the state the pass ended in', async function () {
    const configured = createManager({
      kcp: planes.kcp,
      namespace: ns,
      skrTimeoutMs: 5_000,
      requeue: { Ready: 1_234, Warning: 4_321 },
    });
    try {
      await createKyma(ns, 'kyma-q', 'skr1', [{ name: 'sample' }]);
      expect(await configured.reconciler.reconcile(`${ns}/kyma-q`)).to.deep.equal({ requeueAfterMs: 1_234 });
      await createKyma(ns, 'kyma-w', 'skr2', [{ name: 'sample', customResourcePolicy: 'Ignore' }]);
      expect(await configured.reconciler.reconcile(`${ns}/kyma-w`)).to.deep.equal({ requeueAfterMs: 4_321 });
    } finally {
      await configured.close();
    }
  });

  it('with customResourcePolicy Ignore creates no Module CR (Warning) but mirrors one the user creates', async function () {
    await createKyma(ns, 'kyma-i', 'skr1', [{ name: 'sample', customResourcePolicy: 'Ignore' }]);
    expect(await manager.reconciler.reconcile(`${ns}/kyma-i`)).to.deep.equal({
      requeueAfterMs: REQUEUE_MS.Warning,
    });
    expect(await getOrUndefined(() => custom(planes.skr1).getNamespacedCustomObject(sampleRef()))).to.equal(
      undefined,
    );
    expect(await moduleConfig(ns, 'kyma-i', 'sample')).to.equal(undefined);
    let kyma = (await kcpKyma(ns, 'kyma-i')) as { status: { state: string; modules: Json[] } };
    expect(kyma.status.state).to.equal('Warning');

    await custom(planes.skr1).createNamespacedCustomObject({
      ...sampleRef(),
      body: {
        apiVersion: `${GROUP}/${KINDS.sample.version}`,
        kind: KINDS.sample.kind,
        metadata: { name: 'sample', namespace: SKR_NS },
        spec: { replicas: 7 },
      },
    });
    expect(await manager.reconciler.reconcile(`${ns}/kyma-i`)).to.deep.equal({
      requeueAfterMs: REQUEUE_MS.Ready,
    });
    const config = (await moduleConfig(ns, 'kyma-i', 'sample')) as { spec: { resource: Json } };
    expect(config.spec.resource['spec']).to.deep.equal({ replicas: 7 });

    // Gone again: the ModuleConfig follows.
    await custom(planes.skr1).deleteNamespacedCustomObject(sampleRef());
    await manager.reconciler.reconcile(`${ns}/kyma-i`);
    expect(await moduleConfig(ns, 'kyma-i', 'sample')).to.equal(undefined);
    kyma = (await kcpKyma(ns, 'kyma-i')) as typeof kyma;
    expect(kyma.status.state).to.equal('Warning');
  });

  it('installs the Kyma CRD in an SKR that lacks it', async function () {
    const crds = planes.skr2.makeApiClient(ApiextensionsV1Api);
    const name = `${KINDS.kyma.plural}.${GROUP}`;
    await crds.deleteCustomResourceDefinition({ name });
    for (
      let i = 0;
      i < 100 && (await getOrUndefined(() => crds.readCustomResourceDefinition({ name })));
      i++
    ) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(await getOrUndefined(() => crds.readCustomResourceDefinition({ name }))).to.equal(undefined);

    await createKyma(ns, 'kyma-r', 'skr2', []);
    // A fresh CRD may answer 429 for a moment; the pass then fails and the next one converges.
    let result;
    for (let attempt = 0; attempt < 10 && !result; attempt++) {
      result = await manager.reconciler.reconcile(`${ns}/kyma-r`).catch(() => undefined);
    }
    expect(result).to.deep.equal({ requeueAfterMs: REQUEUE_MS.Ready });
    const crd = await crds.readCustomResourceDefinition({ name });
    expect(crd.spec.versions.map((v) => v.name)).to.deep.equal([KINDS.kyma.version]);
    expect(
      crd.spec.versions[0]?.schema?.openAPIV3Schema?.properties?.['status']
        ?.x_kubernetes_preserve_unknown_fields,
    ).to.equal(true);
    expect(
      await getOrUndefined(() => custom(planes.skr2).getNamespacedCustomObject(skrKymaRef)),
    ).to.not.equal(undefined);
  });

  it('brings a CRD an older agent installed up to date and leaves one it did not install alone', async function () {
    const crds = planes.skr2.makeApiClient(ApiextensionsV1Api);
    const kymaCrd = `${KINDS.kyma.plural}.${GROUP}`;
    const templateCrd = `${KINDS.moduleTemplate.plural}.${GROUP}`;
    const moduleFields = (crd: { spec: { versions: Array<{ schema?: { openAPIV3Schema?: unknown } }> } }) =>
      (crd.spec.versions[0]?.schema?.openAPIV3Schema as Json)['properties'] as {
        spec: { properties: { modules: { items: { properties: Record<string, unknown> } } } };
      };

    // The Kyma CRD as an agent from before `managed` existed left it: ours, no digest, no such field.
    const older = await crds.readCustomResourceDefinition({ name: kymaCrd });
    delete moduleFields(older).spec.properties.modules.items.properties['managed'];
    delete older.metadata?.annotations?.[CRD_DIGEST_ANNOTATION];
    await crds.replaceCustomResourceDefinition({ name: kymaCrd, body: older });
    // A ModuleTemplate CRD someone else installed.
    const foreign = await crds.readCustomResourceDefinition({ name: templateCrd });
    foreign.metadata!.labels = { ...foreign.metadata?.labels, [LABELS.managedBy]: 'lifecycle-manager' };
    delete foreign.metadata?.annotations?.[CRD_DIGEST_ANNOTATION];
    const foreignVersion = (await crds.replaceCustomResourceDefinition({ name: templateCrd, body: foreign }))
      .metadata?.resourceVersion;

    const skr = await createClusterClient(planes.skr2, { name: 'skr2' });
    try {
      const check = await ensureSkrCrds(skr);
      expect(check.installed).to.deep.equal([]);
      expect(check.updated).to.include(kymaCrd).and.not.include(templateCrd);
      const updated = await crds.readCustomResourceDefinition({ name: kymaCrd });
      expect(updated.metadata?.annotations?.[CRD_DIGEST_ANNOTATION]).to.match(/^[0-9a-f]{16}$/);
      expect(moduleFields(updated).spec.properties.modules.items.properties).to.have.property('managed');
      const untouched = await crds.readCustomResourceDefinition({ name: templateCrd });
      expect(untouched.metadata?.resourceVersion).to.equal(foreignVersion);
      expect(untouched.metadata?.labels?.[LABELS.managedBy]).to.equal('lifecycle-manager');
      expect(untouched.metadata?.annotations?.[CRD_DIGEST_ANNOTATION]).to.equal(undefined);
      // Checked once per client.
      expect(await ensureSkrCrds(skr)).to.deep.equal({ installed: [], updated: [] });
    } finally {
      await skr.close();
      const back = await crds.readCustomResourceDefinition({ name: templateCrd });
      back.metadata!.labels = { ...back.metadata?.labels, [LABELS.managedBy]: MANAGED_BY };
      await crds.replaceCustomResourceDefinition({ name: templateCrd, body: back });
    }
  });

  it("leaves another controller's Kyma condition alone and does not rewrite status for it", async function () {
    await createKyma(ns, 'kyma-f', 'skr1', []);
    await manager.reconciler.reconcile(`${ns}/kyma-f`);
    await kcpCustom.patchNamespacedCustomObjectStatus(
      {
        ...kymaRef(ns, 'kyma-f'),
        body: {
          apiVersion: `${GROUP}/${KINDS.kyma.version}`,
          kind: KINDS.kyma.kind,
          metadata: { name: 'kyma-f', namespace: ns },
          status: {
            conditions: [
              {
                type: 'Foo',
                status: 'True',
                reason: 'Other',
                message: 'x',
                lastTransitionTime: new Date().toISOString(),
              },
            ],
          },
        },
        fieldManager: 'other-controller',
      },
      setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
    );
    const before = (await kcpKyma(ns, 'kyma-f')) as { metadata: { resourceVersion: string } };
    await manager.reconciler.reconcile(`${ns}/kyma-f`);
    const after = (await kcpKyma(ns, 'kyma-f')) as {
      metadata: { resourceVersion: string };
      status: { conditions: Json[] };
    };
    expect(after.metadata.resourceVersion).to.equal(before.metadata.resourceVersion);
    expect(after.status.conditions.map((c) => c['type'])).to.include.members([
      'Foo',
      'SKRConnected',
      'Modules',
    ]);
  });

  it('takes the names of SyncResources from the caller when given (an informer index), reading each fresh', async function () {
    await manager.close();
    const asked: string[] = [];
    manager = createManager({
      kcp: await kubeConfigAsAgent(planes.kcp, ns),
      namespace: ns,
      syncResourceNames: (namespace, kyma) => {
        asked.push(`${namespace}/${kyma}`);
        return ['sync-h', 'sync-gone'];
      },
    });
    await createKyma(ns, 'kyma-h', 'skr1', []);
    await manager.reconciler.reconcile(`${ns}/kyma-h`);
    await createSyncResource(ns, 'sync-h', 'kyma-h', [
      configMapItem('c', 'CreateAndSync', 'cm-h', { a: '1' }),
    ]);
    await createSyncResource(ns, 'sync-unindexed', 'kyma-h', [
      configMapItem('c', 'CreateAndSync', 'cm-u', { a: '1' }),
    ]);
    await manager.reconciler.reconcile(`${ns}/kyma-h`);
    expect(asked).to.include(`${ns}/kyma-h`);
    expect(await skrConfigMap(planes.skr1, 'cm-h')).to.not.equal(undefined);
    expect(await skrConfigMap(planes.skr1, 'cm-u')).to.equal(undefined);
  });

  it("reads the catalog, Watchers and ModuleConfigs from the caller's watch caches when given: no list of them per pass", async function () {
    await manager.close();
    const listed = async (kind: 'moduleTemplate' | 'moduleReleaseMeta') =>
      (
        (await kcpCustom.listNamespacedCustomObject({
          group: GROUP,
          version: KINDS[kind].version,
          plural: KINDS[kind].plural,
          namespace: ns,
        })) as { items: unknown[] }
      ).items;
    // What a watch would hold: the objects as the API server sent them.
    const templates = await listed('moduleTemplate');
    const metas = await listed('moduleReleaseMeta');
    registry = createRegistry();
    manager = createManager({
      kcp: await kubeConfigAsAgent(planes.kcp, ns),
      namespace: ns,
      registry,
      caches: {
        moduleTemplates: () => templates,
        moduleReleaseMetas: () => metas,
        watchers: () => [],
        moduleConfigs: () => [],
      },
    });
    await createKyma(ns, 'kyma-c', 'skr1', [{ name: 'sample' }]);
    await manager.reconciler.reconcile(`${ns}/kyma-c`);
    await manager.reconciler.reconcile(`${ns}/kyma-c`);
    // The module resolved from the cached catalog: its Module CR is in the SKR.
    const sample = await getOrUndefined(() => custom(planes.skr1).getNamespacedCustomObject(sampleRef()));
    expect(sample).to.not.equal(undefined);
    const values = (await registry.getSingleMetric('skr_agent_kube_requests_total')?.get())?.values ?? [];
    const kcpLists = values
      .filter((v) => v.labels['cluster'] === 'kcp' && v.labels['verb'] === 'list' && v.value > 0)
      .map((v) => v.labels['resource']);
    const cached = ['moduletemplates', 'modulereleasemetas', 'watchers', 'moduleconfigs'];
    expect(kcpLists.filter((resource) => cached.includes(String(resource)))).to.deep.equal([]);
  });
});
