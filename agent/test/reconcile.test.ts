// Lifecycle reconciliation on real control planes: one KCP and two SKRs of a private environment (the SKR
// side always uses kyma-system/default, so these tests must not share SKRs with other suites).
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'chai';
import {
  ApiextensionsV1Api,
  CoreV1Api,
  loadYaml,
  type V1CustomResourceDefinition,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import { DEFAULTS, GROUP, KINDS, KYMA_FINALIZER, LABELS, REQUEUE_MS } from '@skr-watcher/api';
import { DEFAULT_CRD_DIR, startEnvironment, type Environment } from '@skr-watcher/testenv';
import { createRegistry } from '@skr-watcher/telemetry';
import { createReconciler, moduleConfigName, type Reconciler } from '../src/reconcile/index.js';

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
let kcpCustom: CustomObjectsApi;
let kcpCore: CoreV1Api;
let counter = 0;

function custom(kc: KubeConfig) {
  return kc.makeApiClient(CustomObjectsApi);
}

const kymaRef = (namespace: string, name: string) => ({
  group: GROUP,
  version: KINDS.kyma.version,
  plural: KINDS.kyma.plural,
  namespace,
  name,
});
const skrKymaRef = kymaRef(SKR_NS, DEFAULTS.skrKymaName);
const sampleRef = (name = 'sample') => ({
  group: GROUP,
  version: KINDS.sample.version,
  plural: KINDS.sample.plural,
  namespace: SKR_NS,
  name,
});

async function getOrUndefined<T>(read: () => Promise<T>): Promise<T | undefined> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await read();
    } catch (error) {
      const code = (error as { code?: number }).code;
      if (code === 404) return undefined;
      // A fresh CRD answers 429 "storage is (re)initializing" for a moment.
      if (code !== 429 || attempt > 20) throw error;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

/**
 * testenv installs CRDs from a plain YAML parse, which client-node's serializer strips of every
 * `x-kubernetes-*` key (so embedded resources and preserved fields are pruned). Re-install them faithfully.
 */
async function reinstallCrds(kc: KubeConfig): Promise<void> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  for (const file of (await readdir(DEFAULT_CRD_DIR)).filter((f) => f.endsWith('.yaml'))) {
    const crd = loadYaml<V1CustomResourceDefinition>(await readFile(join(DEFAULT_CRD_DIR, file), 'utf8'));
    const current = await api.readCustomResourceDefinition({ name: crd.metadata!.name! });
    crd.metadata!.resourceVersion = current.metadata!.resourceVersion!;
    await api.replaceCustomResourceDefinition({ name: crd.metadata!.name!, body: crd });
  }
}

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
  await kcpCore.createNamespacedSecret({
    namespace,
    body: {
      metadata: { name: `kubeconfig-${kyma}`, namespace, labels: { [LABELS.kymaName]: kyma } },
      data: { config: Buffer.from(kubeconfig).toString('base64') },
    },
  });
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

describe('lifecycle reconciliation (real KCP and two SKRs)', function () {
  this.timeout(120_000);
  let reconciler: Reconciler;

  before(async function () {
    env = await startEnvironment({ planes: ['kcp', 'skr1', 'skr2'] });
    planes = {
      kcp: env.plane('kcp').kubeConfig(),
      skr1: env.plane('skr1').kubeConfig(),
      skr2: env.plane('skr2').kubeConfig(),
    };
    kcpCustom = custom(planes.kcp);
    kcpCore = planes.kcp.makeApiClient(CoreV1Api);
    for (const kc of [planes.kcp, planes.skr1, planes.skr2]) await reinstallCrds(kc);
    // Fresh CRDs answer 429 "storage is (re)initializing" for a moment; wait that out once per plane.
    for (const kc of [planes.kcp, planes.skr1, planes.skr2]) {
      for (const kind of Object.values(KINDS)) {
        await getOrUndefined(() =>
          custom(kc).listNamespacedCustomObject({
            group: GROUP,
            version: kind.version,
            plural: kind.plural,
            namespace: 'default',
          }),
        );
      }
    }
    // The SKRs' kyma-system namespace is created by the reconciler when missing; make one SKR already have it.
    await planes.skr2.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: SKR_NS } } });
  });

  after(async function () {
    await env?.stop();
  });

  let ns: string;
  beforeEach(async function () {
    ns = await kcpNamespace();
    reconciler = createReconciler({
      kcp: planes.kcp,
      namespace: ns,
      registry: createRegistry(),
      skrTimeoutMs: 5_000,
    });
  });

  afterEach(async function () {
    await reconciler.close();
    await wipeSkr(planes.skr1);
    await wipeSkr(planes.skr2);
  });

  it('creates the SKR Kyma and Module CR, mirrors a Module CR edit into its ModuleConfig, and leaves the other SKR alone', async function () {
    await createKyma(ns, 'kyma-a', 'skr1', [{ name: 'sample' }]);
    await createKyma(ns, 'kyma-b', 'skr2', [{ name: 'sample' }]);

    expect(await reconciler.reconcile(`${ns}/kyma-a`)).to.deep.equal({ requeueAfterMs: REQUEUE_MS.Ready });
    expect(await reconciler.reconcile(`${ns}/kyma-b`)).to.deep.equal({ requeueAfterMs: REQUEUE_MS.Ready });

    const kymaA = (await kcpKyma(ns, 'kyma-a')) as { metadata: Json; status: Json };
    expect(kymaA.metadata['finalizers']).to.include(KYMA_FINALIZER);
    expect(kymaA.status['state']).to.equal('Ready');
    expect(kymaA.status['modules']).to.deep.include.members([
      {
        name: 'sample',
        channel: 'regular',
        version: '1.0.0',
        template: 'sample-1.0.0',
        state: 'Ready',
        resource: { group: GROUP, version: 'v1alpha1', kind: 'Sample', name: 'sample', namespace: SKR_NS },
      },
    ]);
    const skr1Kyma = (await custom(planes.skr1).getNamespacedCustomObject(skrKymaRef)) as {
      spec: Json;
      status: Json;
    };
    expect(skr1Kyma.spec['modules']).to.deep.equal([{ name: 'sample' }]);
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
    await reconciler.reconcile(`${ns}/kyma-a`);

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
    await reconciler.reconcile(`${ns}/kyma-a`);
    const after = (await moduleConfig(ns, 'kyma-a', 'sample')) as { metadata: { resourceVersion: string } };
    const kymaAfter = (await kcpKyma(ns, 'kyma-a')) as { metadata: { resourceVersion: string } };
    expect(after.metadata.resourceVersion).to.equal(before.metadata.resourceVersion);
    expect(kymaAfter.metadata.resourceVersion).to.equal(kymaBefore.metadata.resourceVersion);
  });

  it('disabling a module in the SKR Kyma removes its ModuleConfig and the Module CR the agent created', async function () {
    await createKyma(ns, 'kyma-d', 'skr1', [{ name: 'sample' }]);
    await reconciler.reconcile(`${ns}/kyma-d`);
    expect(await moduleConfig(ns, 'kyma-d', 'sample')).to.not.equal(undefined);

    await custom(planes.skr1).patchNamespacedCustomObject(
      { ...skrKymaRef, body: { spec: { modules: [] } } },
      mergePatch,
    );
    await reconciler.reconcile(`${ns}/kyma-d`);

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
    expect(await reconciler.reconcile(`${ns}/kyma-m`)).to.deep.equal({ requeueAfterMs: REQUEUE_MS.Error });

    const kyma = (await kcpKyma(ns, 'kyma-m')) as {
      status: { state: string; modules: Json[]; conditions: Json[] };
    };
    expect(kyma.status.state).to.equal('Error');
    const broken = kyma.status.modules.find((m) => m['name'] === 'nosuch');
    expect(broken?.['state']).to.equal('Error');
    expect(broken?.['message']).to.match(/TemplateNotFound: ModuleTemplate .*\/nosuch-9\.9\.9 not found/);
    expect(kyma.status.modules.find((m) => m['name'] === 'sample')?.['state']).to.equal('Ready');
    expect(await moduleConfig(ns, 'kyma-m', 'sample')).to.not.equal(undefined);
    const condition = kyma.status.conditions.find((c) => c['type'] === 'ModulesReady');
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
    expect(await reconciler.reconcile(`${ns}/kyma-p`)).to.deep.equal({});
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
    await reconciler.reconcile(`${ns}/kyma-p`);
    expect(
      await getOrUndefined(() => custom(planes.skr1).getNamespacedCustomObject(skrKymaRef)),
    ).to.not.equal(undefined);
  });

  it('a reconcile of a Kyma that does not exist is a no-op', async function () {
    expect(await reconciler.reconcile(`${ns}/ghost`)).to.deep.equal({});
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
    await reconciler.reconcile(`${ns}/kyma-n`).catch((error: unknown) => (failure = error));
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
  });
});
