// Upstream lifecycle-manager's e2e scenarios that need real nodes, on planes whose kubelets run what modules install
// and whose controller-managers run the StatefulSet controller and the garbage collector: a module whose manager is a
// StatefulSet (module-status-decoupling-with-statefulset), a manager whose image cannot be pulled (the wrong-image case
// of -with-statefulset and -with-deployment), and the deletion of a KCP Kyma with Foreground and with Background
// propagation, and the deprovisioning of a Kyma whose module removal is blocked when its SKR is then removed
// (kyma-deprovision-with-*-propagation). The agent and the webhooks run as processes from source.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  Watch,
  type V1StatefulSet,
} from '@kubernetes/client-node';
import { DEFAULTS, GROUP, KINDS, LABELS, manifestName } from '@skr-watcher/api';
import { getCustomObject, mergePatchCustomObject } from '@skr-watcher/kube';
import { nodeSupportProblem } from '@skr-watcher/testenv';
import {
  SKR_KYMA,
  SKR_WEBHOOK_CONFIGURATION,
  startLocalSystem,
  type LocalSystem,
} from '../support/system/index.js';
import { GREETER, GREETER_DEFAULT_CR } from '../support/system/modules.js';
import {
  publishWorkloadModules,
  workloadModule,
  type WorkloadModule,
} from '../support/system/workload-modules.js';
import { eventually } from '../support/eventually.js';

/** Generous: two busy cores, image pulls, Pod starts and the kubelet's pull backoff all add up. */
const CONVERGE_MS = 240_000;
const KEEPER = workloadModule('keeper', 'StatefulSet');
const KEEPER_MISCONFIGURED = workloadModule('keeper-misconfigured', 'StatefulSet');
const DRIVE_MISCONFIGURED = workloadModule('drive-misconfigured', 'Deployment');

interface ModuleEntry {
  name?: string;
  state?: string;
  message?: string;
}
interface KymaView {
  metadata?: { deletionTimestamp?: string; finalizers?: string[] };
  status?: { state?: string; modules?: ModuleEntry[] };
}
interface ManifestView {
  status?: { state?: string; lastOperation?: { operation?: string } };
}

describe('modules whose managers run on real nodes, and the deletion of a Kyma with each propagation policy', function () {
  // A cold machine builds kubelet and friends first (≈ 20 min), then the image.
  this.timeout(3_600_000);
  const problem = nodeSupportProblem();
  let parent: string;
  let system: LocalSystem;

  before(async function () {
    if (problem) {
      // Only machines that cannot run nodes at all skip; everything else that fails is a failure.
      process.stderr.write(`skipping the node scenarios: ${problem}\n`);
      this.skip();
    }
    parent = await mkdtemp(join(tmpdir(), 'skr-node-scenarios-'));
    system = await startLocalSystem({
      dir: join(parent, 'system'),
      skrs: ['skr1', 'skr2', 'skr3'],
      modules: true,
      nodes: true,
      // The image build and the nodes come first on a cold machine.
      startupTimeoutMs: 1_800_000,
      progress: (line) => process.stderr.write(`  ${line}\n`),
    });
    const nodes = system.env.nodes;
    if (!nodes || !system.modules) throw new Error('the system started without nodes or a module registry');
    // An image no registry serves: every pull of it fails, as upstream's misconfigured template-operator's does.
    const unpullable = `${nodes.registry}/module-manager-that-was-never-pushed:1.0.0`;
    await publishWorkloadModules({
      registryHost: system.modules.registryHost,
      kcp: system.kcp,
      namespace: system.namespace,
      modules: [
        { module: KEEPER, image: nodes.images.app },
        { module: KEEPER_MISCONFIGURED, image: unpullable },
        { module: DRIVE_MISCONFIGURED, image: unpullable },
      ],
    });
  });
  after(async function () {
    this.timeout(180_000);
    await system?.stop();
    if (parent) await rm(parent, { recursive: true, force: true });
  });

  const skrConfig = (skr: string) => system.skr(skr).kubeConfig();
  const kymaRef = (skr: string) => ({
    group: GROUP,
    version: KINDS.kyma.version,
    plural: KINDS.kyma.plural,
    namespace: system.namespace,
    name: skr,
  });
  const manifestRef = (skr: string, module: WorkloadModule) => ({
    group: GROUP,
    version: KINDS.manifest.version,
    plural: KINDS.manifest.plural,
    namespace: system.namespace,
    name: manifestName(module.ocmComponentName, skr, module.module),
  });
  const kcpKyma = async (skr: string) =>
    (await getCustomObject(system.kcp.makeApiClient(CustomObjectsApi), kymaRef(skr))) as KymaView | undefined;
  const manifestOf = async (skr: string, module: WorkloadModule) =>
    (await getCustomObject(system.kcp.makeApiClient(CustomObjectsApi), manifestRef(skr, module))) as
      ManifestView | undefined;

  /** The distinct states the KCP Kyma of `skr` has had (as listed, then as written) for `forMs`. */
  async function kymaStatesFor(skr: string, forMs: number): Promise<string[]> {
    const custom = system.kcp.makeApiClient(CustomObjectsApi);
    const listed = (await custom.listNamespacedCustomObject({
      group: GROUP,
      version: KINDS.kyma.version,
      plural: KINDS.kyma.plural,
      namespace: system.namespace,
      fieldSelector: `metadata.name=${skr}`,
    })) as { metadata?: { resourceVersion?: string }; items: KymaView[] };
    const states = new Set(listed.items.map((kyma) => kyma.status?.state ?? ''));
    let failure: unknown;
    let stopped = false;
    const request = await new Watch(system.kcp).watch(
      `/apis/${GROUP}/${KINDS.kyma.version}/namespaces/${system.namespace}/${KINDS.kyma.plural}`,
      { fieldSelector: `metadata.name=${skr}`, resourceVersion: listed.metadata?.resourceVersion },
      (_type: string, kyma: KymaView) => states.add(kyma.status?.state ?? ''),
      (error: unknown) => {
        if (!stopped) failure ??= error ?? new Error('the watch ended early');
      },
    );
    await new Promise((resolve) => setTimeout(resolve, forMs));
    stopped = true;
    request.abort();
    if (failure) throw new Error(`watching Kyma ${skr} failed`, { cause: failure });
    return [...states];
  }

  /** Adds or removes modules in the SKR Kyma's spec.modules, as a user does. */
  async function setModules(skr: string, change: { enable?: WorkloadModule[]; disable?: WorkloadModule[] }) {
    const api = skrConfig(skr).makeApiClient(CustomObjectsApi);
    const current = (await api.getNamespacedCustomObject(SKR_KYMA)) as {
      spec?: { modules?: { name: string }[] };
    };
    const off = new Set((change.disable ?? []).map((m) => m.module));
    const modules = [
      ...(current.spec?.modules ?? []).filter((m) => !off.has(m.name)),
      ...(change.enable ?? []).map((m) => ({ name: m.module, channel: 'regular' })),
    ];
    await mergePatchCustomObject(api, SKR_KYMA, { spec: { modules } });
  }

  /** The states the module's Manifest and its entry in the KCP Kyma pass through, sampled until `until` holds. */
  async function followModule(
    skr: string,
    module: WorkloadModule,
    until: (manifest: ManifestView | undefined, entry: ModuleEntry | undefined, kyma: KymaView) => boolean,
  ) {
    const seen: string[] = [];
    const deadline = Date.now() + CONVERGE_MS;
    let last = '';
    while (Date.now() < deadline) {
      const manifest = await manifestOf(skr, module);
      const kyma = (await kcpKyma(skr)) ?? {};
      const entry = kyma.status?.modules?.find((m) => m.name === module.module);
      const state = manifest?.status?.state;
      if (state && seen.at(-1) !== state) seen.push(state);
      last = `Manifest ${state ?? '(none)'} "${manifest?.status?.lastOperation?.operation ?? ''}", Kyma entry ${entry?.state ?? '(none)'}, Kyma ${kyma.status?.state ?? '(none)'}`;
      if (until(manifest, entry, kyma)) return { seen, manifest, entry, kyma };
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    throw new Error(`${module.module} in ${skr}: not within ${CONVERGE_MS / 1000} s; last seen: ${last}`);
  }

  async function managerGone(skr: string, module: WorkloadModule) {
    const config = skrConfig(skr);
    const apps = config.makeApiClient(AppsV1Api);
    const fieldSelector = `metadata.name=${module.workload}`;
    const labelSelector = `app.kubernetes.io/name=${module.workload}`;
    const [statefulSets, deployments, pods, revisions, services] = await Promise.all([
      apps.listNamespacedStatefulSet({ namespace: module.namespace, fieldSelector }),
      apps.listNamespacedDeployment({ namespace: module.namespace, fieldSelector }),
      config.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: module.namespace, labelSelector }),
      apps.listNamespacedControllerRevision({ namespace: module.namespace, labelSelector }),
      config.makeApiClient(CoreV1Api).listNamespacedService({ namespace: module.namespace, fieldSelector }),
    ]);
    const left = [
      ...statefulSets.items.map((o) => `StatefulSet ${o.metadata?.name}`),
      ...deployments.items.map((o) => `Deployment ${o.metadata?.name}`),
      ...pods.items.map((o) => `Pod ${o.metadata?.name}`),
      ...revisions.items.map((o) => `ControllerRevision ${o.metadata?.name}`),
      ...services.items.map((o) => `Service ${o.metadata?.name}`),
    ];
    return left;
  }

  it('a module whose manager is a StatefulSet is Processing while it rolls out and Ready once the StatefulSet is', async () => {
    // skr2 gets the module too: its Kyma is the one deleted in the background below.
    await Promise.all([setModules('skr1', { enable: [KEEPER] }), setModules('skr2', { enable: [KEEPER] })]);
    const { seen, kyma } = await followModule(
      'skr1',
      KEEPER,
      (manifest, entry, view) =>
        manifest?.status?.state === 'Ready' && entry?.state === 'Ready' && view.status?.state === 'Ready',
    );
    expect(seen, 'Manifest states in order').to.include('Processing');
    expect(seen.indexOf('Processing')).to.be.lessThan(seen.indexOf('Ready'));
    expect(seen, 'Manifest states in order').not.to.include('Error');
    expect(kyma.status?.state).to.equal('Ready');
    const statefulSet: V1StatefulSet = await skrConfig('skr1')
      .makeApiClient(AppsV1Api)
      .readNamespacedStatefulSet({ name: KEEPER.workload, namespace: KEEPER.namespace });
    expect(statefulSet.status?.readyReplicas, 'ready replicas of the StatefulSet').to.equal(1);
    expect(statefulSet.status?.currentRevision).to.equal(statefulSet.status?.updateRevision);
    await followModule(
      'skr2',
      KEEPER,
      (manifest, entry) => manifest?.status?.state === 'Ready' && entry?.state === 'Ready',
    );
  });

  for (const module of [KEEPER_MISCONFIGURED, DRIVE_MISCONFIGURED]) {
    it(`a module whose ${module.kind} manager cannot pull its image turns Error, and the Kyma with it, until it is disabled`, async () => {
      await setModules('skr1', { enable: [module] });
      const started = Date.now();
      const { manifest, entry, kyma } = await followModule(
        'skr1',
        module,
        (view, moduleEntry, kymaView) =>
          view?.status?.state === 'Error' &&
          moduleEntry?.state === 'Error' &&
          kymaView.status?.state === 'Error',
      );
      const tookMs = Date.now() - started;
      process.stderr.write(
        `  ${module.module}: Error ${(tookMs / 1000).toFixed(1)} s after it was enabled\n`,
      );
      expect(manifest?.status?.lastOperation?.operation).to.match(/ErrImagePull|ImagePullBackOff/);
      expect(entry?.state).to.equal('Error');
      expect(kyma.status?.state).to.equal('Error');
      // The healthy module next to it stays Ready.
      expect(kyma.status?.modules?.find((m) => m.name === KEEPER.module)?.state).to.equal('Ready');

      // Disabled: its Manifest and its workload go, and the Kyma is Ready again.
      await setModules('skr1', { disable: [module] });
      await followModule(
        'skr1',
        module,
        (view, moduleEntry, kymaView) =>
          view === undefined && moduleEntry === undefined && kymaView.status?.state === 'Ready',
      );
      await eventually(
        `${module.workload} and its Pods gone from skr1`,
        async () => ((await managerGone('skr1', module)).length === 0 ? true : undefined),
        CONVERGE_MS,
      );
    });
  }

  /**
   * Deletes the KCP Kyma with `propagationPolicy` and follows it, the Manifests and what the module installed until
   * everything is gone; answers when each disappeared.
   */
  async function deleteKcpKyma(skr: string, propagationPolicy: 'Foreground' | 'Background') {
    const custom = system.kcp.makeApiClient(CustomObjectsApi);
    const manifests = async () =>
      (
        (await custom.listNamespacedCustomObject({
          group: GROUP,
          version: KINDS.manifest.version,
          plural: KINDS.manifest.plural,
          namespace: system.namespace,
          labelSelector: `${LABELS.kymaName}=${skr}`,
        })) as { items: unknown[] }
      ).items.length;
    expect(await manifests(), `Manifests of ${skr} before the deletion`).to.be.greaterThan(0);
    const started = Date.now();
    await custom.deleteNamespacedCustomObject({ ...kymaRef(skr), propagationPolicy });
    let manifestsGoneAt: number | undefined;
    let kymaGoneAt: number | undefined;
    let foregroundSeen = false;
    while (Date.now() - started < CONVERGE_MS && kymaGoneAt === undefined) {
      const kyma = await kcpKyma(skr);
      if (kyma?.metadata?.finalizers?.includes('foregroundDeletion')) foregroundSeen = true;
      if (manifestsGoneAt === undefined && (await manifests()) === 0) manifestsGoneAt = Date.now();
      if (kyma === undefined) kymaGoneAt = Date.now();
      else await new Promise((resolve) => setTimeout(resolve, 100));
    }
    if (kymaGoneAt === undefined) {
      const kyma = await kcpKyma(skr);
      throw new Error(
        `KCP Kyma ${skr} still there ${CONVERGE_MS / 1000} s after its ${propagationPolicy} deletion: finalizers ${JSON.stringify(kyma?.metadata?.finalizers)}, state ${kyma?.status?.state}, modules ${JSON.stringify(kyma?.status?.modules)}`,
      );
    }
    manifestsGoneAt ??= (await manifests()) === 0 ? Date.now() : undefined;
    process.stderr.write(
      `  ${skr} (${propagationPolicy}): Manifests gone after ${(((manifestsGoneAt ?? NaN) - started) / 1000).toFixed(1)} s, Kyma gone after ${((kymaGoneAt - started) / 1000).toFixed(1)} s\n`,
    );
    return { manifestsGoneAt, kymaGoneAt, foregroundSeen };
  }

  /** Nothing of the Kyma is left: module workloads and their Pods, the SKR Kyma, the webhook's configuration, ModuleConfigs. */
  async function expectNothingLeft(skr: string) {
    await eventually(
      `${KEEPER.workload}, its Pods, ControllerRevisions and Service gone from ${skr}`,
      async () => ((await managerGone(skr, KEEPER)).length === 0 ? true : undefined),
      CONVERGE_MS,
    ).catch(async (error: unknown) => {
      throw new Error(`left in ${skr}: ${(await managerGone(skr, KEEPER)).join(', ')}`, { cause: error });
    });
    const config = skrConfig(skr);
    expect(
      await getCustomObject(config.makeApiClient(CustomObjectsApi), SKR_KYMA),
      `SKR Kyma ${DEFAULTS.skrNamespace}/${DEFAULTS.skrKymaName} in ${skr}`,
    ).to.equal(undefined);
    const hooks = await config
      .makeApiClient(AdmissionregistrationV1Api)
      .listValidatingWebhookConfiguration({ fieldSelector: `metadata.name=${SKR_WEBHOOK_CONFIGURATION}` });
    expect(hooks.items, `webhook configuration in ${skr}`).to.deep.equal([]);
    const configs = (await system.kcp.makeApiClient(CustomObjectsApi).listNamespacedCustomObject({
      group: GROUP,
      version: KINDS.moduleConfig.version,
      plural: KINDS.moduleConfig.plural,
      namespace: system.namespace,
      labelSelector: `${LABELS.kymaName}=${skr}`,
    })) as { items: unknown[] };
    expect(configs.items, `ModuleConfigs of ${skr}`).to.deep.equal([]);
  }

  it('deleting the KCP Kyma with Foreground propagation removes its modules from the SKR, its Manifests, the SKR Kyma, and the Kyma last', async () => {
    const { manifestsGoneAt, kymaGoneAt, foregroundSeen } = await deleteKcpKyma('skr1', 'Foreground');
    expect(foregroundSeen, 'the Kyma waited on its dependents (foregroundDeletion finalizer)').to.equal(true);
    expect(manifestsGoneAt, 'Manifests gone').to.not.equal(undefined);
    expect(manifestsGoneAt ?? Infinity, 'Manifests gone before the Kyma').to.be.at.most(kymaGoneAt);
    await expectNothingLeft('skr1');
  });

  it('deleting the KCP Kyma with Background propagation removes its modules from the SKR, its Manifests and the SKR Kyma', async () => {
    const { manifestsGoneAt } = await deleteKcpKyma('skr2', 'Background');
    await eventually(
      'Manifests of skr2 gone',
      async () =>
        manifestsGoneAt !== undefined || (await manifestOf('skr2', KEEPER)) === undefined ? true : undefined,
      CONVERGE_MS,
    );
    await expectNothingLeft('skr2');
  });

  it('deprovisioning: a Kyma deleted (Foreground) while a module CR blocks its removal turns Error once the SKR is gone, and goes once its kubeconfig Secret does', async () => {
    // Upstream's deprovision scenario: a module whose Module CR carries a finalizer nobody removes is disabled, so its
    // Manifest stays Deleting; the KCP Kyma is deleted; the SKR cluster is removed; the Kyma turns Error; the kubeconfig
    // Secret (which the agent never deletes) is deleted; then the Manifest goes and the Kyma with it.
    const skr = 'skr3';
    const greeter: WorkloadModule = {
      module: GREETER.module,
      ocmComponentName: GREETER.ocmComponentName,
      kind: 'Deployment',
      workload: GREETER.deployment,
      namespace: GREETER.namespace,
    };
    await setModules(skr, { enable: [greeter] });
    await followModule(
      skr,
      greeter,
      (manifest, entry) => manifest?.status?.state === 'Ready' && entry?.state === 'Ready',
    );
    const moduleCr = {
      group: GREETER.group,
      version: GREETER.crdVersion,
      plural: GREETER.plural,
      namespace: GREETER_DEFAULT_CR.metadata.namespace,
      name: GREETER_DEFAULT_CR.metadata.name,
    };
    const skrCustom = skrConfig(skr).makeApiClient(CustomObjectsApi);
    await mergePatchCustomObject(skrCustom, moduleCr, { metadata: { finalizers: ['cr-finalizer'] } });
    await setModules(skr, { disable: [greeter] });
    await followModule(skr, greeter, (manifest) => manifest?.status?.state === 'Deleting');
    const blocked = (await getCustomObject(skrCustom, moduleCr)) as {
      metadata?: { deletionTimestamp?: string };
    };
    expect(
      blocked.metadata?.deletionTimestamp,
      'the Module CR is being deleted, held by its finalizer',
    ).to.be.a('string');

    await system.kcp
      .makeApiClient(CustomObjectsApi)
      .deleteNamespacedCustomObject({ ...kymaRef(skr), propagationPolicy: 'Foreground' });
    // The module removal is blocked, so the Kyma stays (being deleted).
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    expect((await kcpKyma(skr))?.metadata?.deletionTimestamp, 'KCP Kyma still there, being deleted').to.be.a(
      'string',
    );

    // The SKR cluster is removed: its API server answers no more.
    await system.env.plane(skr).stopApiServer();
    await eventually(
      `KCP Kyma ${skr} Error with its SKR gone`,
      async () => ((await kcpKyma(skr))?.status?.state === 'Error' ? true : undefined),
      CONVERGE_MS,
    );
    // And it stays Error while the agent retries: every status write arrives as a watch event, so a retry that flips
    // it back to Deleting for a moment cannot fall between two samples.
    expect(
      await kymaStatesFor(skr, 8_000),
      'states the Kyma was written with while the SKR is gone',
    ).to.deep.equal(['Error']);
    // The agent leaves the kubeconfig Secret to whoever provisioned it (the SKR's certificate Secret carries the label
    // too; the kubeconfig is the one with the key `config`).
    const core = system.kcp.makeApiClient(CoreV1Api);
    const secrets = await core.listNamespacedSecret({
      namespace: system.namespace,
      labelSelector: `${LABELS.kymaName}=${skr}`,
    });
    const kubeconfigs = secrets.items.filter((secret) => secret.data?.[DEFAULTS.kubeconfigSecretKey]);
    expect(kubeconfigs.length, `kubeconfig Secret of ${skr}`).to.equal(1);
    for (const secret of kubeconfigs)
      await core.deleteNamespacedSecret({ name: secret.metadata?.name ?? '', namespace: system.namespace });

    await eventually(
      `Manifest of ${GREETER.module} and KCP Kyma ${skr} gone`,
      async () =>
        (await manifestOf(skr, greeter)) === undefined && (await kcpKyma(skr)) === undefined
          ? true
          : undefined,
      CONVERGE_MS,
    );
  });
});
