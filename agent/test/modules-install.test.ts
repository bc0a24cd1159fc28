// Module installation end to end on a real KCP, a real SKR and a real registry (decision 021): a module
// published with publishModule (modulectl's layout) is pulled, rendered with upstream's transforms, applied into the
// SKR (CRDs first, default CR once after its CRD), reported Ready in the Manifest and the Kyma; upgraded with what
// left the set pruned only after the new set applied; removed in upstream's order (users' CRs block it); mandatory,
// unmanaged, and adoption of a Manifest upstream wrote.
import { expect } from 'chai';
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import {
  ANNOTATIONS,
  GROUP,
  KINDS,
  LABELS,
  LIFECYCLE_MANAGER,
  MANIFEST,
  manifestName,
  parseManifest,
} from '@skr-watcher/api';
import { MODULE_OBJECT_METADATA, createClusterClient, pooledKubeConfig } from '@skr-watcher/kube';
import { createRegistry, silentLogger } from '@skr-watcher/telemetry';
import { waitUntil } from '../../test/support/eventually.js';
import { kubeConfigAsAgent } from '../../test/support/kcp-rbac.js';
import { agentConfigFromFlags } from '../src/config.js';
import { testRunFlags } from './support/run-flags.js';
import { createEventStream } from '../src/event-stream.js';
import { startWork } from '../src/work.js';
import { ensureFinalizers } from '../src/reconcile/manifests/install.js';
import { bucketOf } from '../src/sharding/ring.js';
import { custom, getOrUndefined, kymaRef, refTo } from './support/planes.js';
import {
  configMapYaml,
  crdYaml,
  docs,
  mergePatch,
  moduleKind,
  moduleSuite,
  type Json,
} from './support/modules.js';

describe('module installation from a registry (Manifests)', function () {
  this.timeout(300_000);
  const suite = moduleSuite();
  const { planes } = suite;
  const skrCore = () => planes.skr.makeApiClient(CoreV1Api);
  const configMap = (name: string, namespace = 'kyma-system') =>
    getOrUndefined(() => skrCore().readNamespacedConfigMap({ name, namespace }));
  const kindOf = moduleKind;
  const moduleCr = (module: string, name: string, namespace = 'kyma-system') => {
    const { group, plural } = kindOf(module);
    return getOrUndefined(() =>
      custom(planes.skr).getNamespacedCustomObject({ group, version: 'v1', plural, namespace, name }),
    ) as Promise<Json | undefined>;
  };
  const defaultCr = (module: string, greeting = 'hello') => {
    const { group, kind } = kindOf(module);
    return `apiVersion: ${group}/v1\nkind: ${kind}\nmetadata:\n  name: ${module}-default\n  namespace: kyma-system\nspec:\n  greeting: ${greeting}\n`;
  };
  const rawManifest = (module: string, ...configMaps: string[]) => {
    const { group, kind } = kindOf(module);
    return docs(crdYaml(group, kind), ...configMaps.map((name) => configMapYaml(name, 'kyma-system')));
  };
  const { deleteKyma } = suite;
  /** Reconciles the Kyma until its module is Ready. */
  const untilModuleReady = (kymaName: string, module: string) =>
    suite.reconcileUntil(
      kymaName,
      async () => (await suite.moduleStatus(kymaName, module))?.state === 'Ready',
      'module Ready',
    );
  /** Module names are lower-case letters (the ModuleTemplate's pattern): one suffix per test. */
  const unique = (base: string) =>
    `${base}-${String.fromCharCode(97 + (suite.state.counter % 26)).repeat(3)}${process.pid
      .toString(26)
      .replace(/[0-9]/g, (d) => String.fromCharCode(107 + Number(d)))}`;

  it('installs a module: objects applied with upstream labels, default CR after its CRD, Ready in Manifest and Kyma; a second pass asks the registry nothing', async function () {
    const module = unique('alpha');
    await suite.publish({
      moduleName: module,
      version: '1.0.0',
      rawManifest: rawManifest(module, `${module}-config`),
      defaultCr: defaultCr(module),
    });
    await suite.kyma('k1', [{ name: module }]);
    await suite.start();
    await untilModuleReady('k1', module);

    const name = manifestName(`kyma-project.io/module/${module}`, 'k1', module);
    const manifest = (await suite
      .api()
      .getNamespacedCustomObject(refTo('manifest', suite.state.ns, name))) as Json;
    expect(manifest.status.state).to.equal('Ready');
    expect(manifest.metadata.finalizers).to.include.members([MANIFEST.finalizer]);
    expect(manifest.metadata.annotations[ANNOTATIONS.syncOciRef]).to.equal(manifest.spec.install.source.ref);
    expect(manifest.status.synced.map((s: Json) => `${s.kind}/${s.name}`).sort()).to.deep.equal(
      [
        `ConfigMap/${module}-config`,
        `CustomResourceDefinition/${kindOf(module).plural}.${module}.test.io`,
      ].sort(),
    );
    const conditions = Object.fromEntries(manifest.status.conditions.map((c: Json) => [c.type, c.status]));
    expect(conditions).to.deep.equal({ Resources: 'True', Installation: 'True', ModuleCR: 'True' });

    const applied = await configMap(`${module}-config`);
    expect(applied?.metadata?.labels).to.include({
      [LABELS.managedBy]: 'kyma',
      'app.kubernetes.io/part-of': 'Kyma',
    });
    expect(applied?.metadata?.annotations?.['deprecated-operator.kyma-project.io/owned-by']).to.equal(
      `${suite.state.ns}/${name}`,
    );
    const cr = await moduleCr(module, `${module}-default`);
    expect(cr?.spec).to.deep.equal({ greeting: 'hello' });
    expect(cr?.metadata.managedFields.map((f: Json) => f.manager)).to.include(MANIFEST.resourceFieldManager);

    const entry = await suite.moduleStatus('k1', module);
    expect(entry?.manifest.metadata.name).to.equal(name);
    expect(entry?.version).to.equal('1.0.0');
    expect(entry?.resource.metadata).to.deep.include({ name: `${module}-default` });

    // Created once: a user's deletion of the default CR stands.
    const { group, plural } = kindOf(module);
    await custom(planes.skr).deleteNamespacedCustomObject({
      group,
      version: 'v1',
      plural,
      namespace: 'kyma-system',
      name: `${module}-default`,
    });
    const sent = { ...suite.state.installation!.source.requests() };
    await suite.state.manager!.reconciler.reconcile(`${suite.state.ns}/k1`);
    expect(await moduleCr(module, `${module}-default`)).to.equal(undefined);
    // Everything came from the cache: not one registry request for a pass over an installed module.
    expect(suite.state.installation!.source.requests()).to.deep.equal(sent);
  });

  it('upgrades: an object that left the set is pruned only once every object of the new set is applied', async function () {
    const module = unique('beta');
    await suite.publish({
      moduleName: module,
      version: '1.0.0',
      rawManifest: rawManifest(module, `${module}-a`, `${module}-b`),
    });
    await suite.kyma('k2', [{ name: module }]);
    await suite.start();
    await suite.reconcileUntil(
      'k2',
      async () => (await suite.moduleStatus('k2', module))?.state === 'Ready',
      'v1 Ready',
    );
    expect(await configMap(`${module}-b`)).to.not.equal(undefined);

    // 2.0.0 drops b, adds c, and holds an object that cannot be applied yet (its namespace does not exist).
    const later = `${module}-later`;
    await suite.publish({
      moduleName: module,
      version: '2.0.0',
      rawManifest: docs(
        rawManifest(module, `${module}-a`, `${module}-c`),
        configMapYaml(`${module}-d`, later),
      ),
    });
    await suite.reconcileUntil(
      'k2',
      async () => {
        const entry = await suite.moduleStatus('k2', module);
        return entry?.version === '2.0.0' && entry.state === 'Error';
      },
      'v2 applied except the object in the missing namespace',
    );
    expect(await configMap(`${module}-c`), 'the new object is applied').to.not.equal(undefined);
    expect(
      await configMap(`${module}-b`),
      'the dropped object stays while the new set is not in place',
    ).to.not.equal(undefined);
    expect((await suite.moduleStatus('k2', module))?.message).to.match(new RegExp(later));

    await skrCore().createNamespace({ body: { metadata: { name: later } } });
    await suite.reconcileUntil(
      'k2',
      async () =>
        (await suite.moduleStatus('k2', module))?.state === 'Ready' && !(await configMap(`${module}-b`)),
      'v2 Ready and the dropped object pruned',
    );
    expect(await configMap(`${module}-a`)).to.not.equal(undefined);
    expect(await configMap(`${module}-d`, later)).to.not.equal(undefined);
    const manifest = (await suite.manifests())[0]!;
    expect(manifest.status.synced.map((s: Json) => s.name)).to.not.include(`${module}-b`);
  });

  it("removes a module in upstream's order: users' CRs block, then the default CR, then the set, then the Manifest", async function () {
    const module = unique('gamma');
    await suite.publish({
      moduleName: module,
      version: '1.0.0',
      rawManifest: rawManifest(module, `${module}-config`),
      defaultCr: defaultCr(module),
    });
    await suite.kyma('k3', [{ name: module }]);
    await suite.start();
    await suite.reconcileUntil(
      'k3',
      async () => (await suite.moduleStatus('k3', module))?.state === 'Ready',
      'Ready',
    );
    const { group, kind, plural } = kindOf(module);
    await custom(planes.skr).createNamespacedCustomObject({
      group,
      version: 'v1',
      plural,
      namespace: 'default',
      body: { apiVersion: `${group}/v1`, kind, metadata: { name: 'users', namespace: 'default' }, spec: {} },
    });

    await suite.skrModules([]);
    await suite.reconcileUntil(
      'k3',
      async () =>
        /waiting for module CRs deletion/.test((await suite.moduleStatus('k3', module))?.message ?? ''),
      'removal blocked by the user CR',
    );
    // Nothing was removed while a user's CR of the module's kind exists.
    await suite.state.manager!.reconciler.reconcile(`${suite.state.ns}/k3`);
    expect((await suite.moduleStatus('k3', module))?.state).to.equal('Deleting');
    expect(await moduleCr(module, `${module}-default`)).to.not.equal(undefined);
    expect(await configMap(`${module}-config`)).to.not.equal(undefined);
    expect(await suite.manifests()).to.have.length(1);

    await custom(planes.skr).deleteNamespacedCustomObject({
      group,
      version: 'v1',
      plural,
      namespace: 'default',
      name: 'users',
    });
    await suite.reconcileUntil(
      'k3',
      async () => (await suite.manifests()).length === 0 && !(await suite.moduleStatus('k3', module)),
      'module removed',
    );
    expect(await moduleCr(module, `${module}-default`)).to.equal(undefined);
    expect(await configMap(`${module}-config`)).to.equal(undefined);
    const crd = await getOrUndefined(() =>
      planes.skr.makeApiClient(CoreV1Api).readNamespace({ name: 'kyma-system' }),
    );
    expect(crd, 'kyma-system stays').to.not.equal(undefined);
  });

  it('installs a mandatory module that no Kyma lists', async function () {
    const module = unique('delta');
    await suite.publish({
      moduleName: module,
      version: '3.0.0',
      mandatory: true,
      rawManifest: rawManifest(module, `${module}-config`),
    });
    await suite.kyma('k4', []);
    await suite.start();
    await suite.reconcileUntil(
      'k4',
      async () => (await suite.moduleStatus('k4', module))?.state === 'Ready',
      'Ready',
    );
    const [manifest] = await suite.manifests();
    expect(manifest?.metadata.labels[LABELS.mandatoryModule]).to.equal('true');
    expect(await configMap(`${module}-config`)).to.not.equal(undefined);
  });

  it('--skr-image-pull-secret: the KCP Secret copied next to the SKR Kyma, named by every workload, SKR_IMG_PULL_SECRET on the manager; a missing Secret is a Warning', async function () {
    const module = unique('pull');
    const deployment = (name: string) =>
      `apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: ${name}\n  namespace: kyma-system\nspec:\n  selector:\n    matchLabels: {app: ${name}}\n  template:\n    metadata:\n      labels: {app: ${name}}\n    spec:\n      containers:\n      - name: main\n        image: example.test/${name}:1\n`;
    const published = await suite.publish({
      moduleName: module,
      version: '1.0.0',
      rawManifest: docs(deployment(`${module}-manager`), deployment(`${module}-worker`)),
    });
    // The template names its manager workload (upstream's spec.manager): only that one gets the variable.
    await suite.api().patchNamespacedCustomObject(
      {
        ...refTo('moduleTemplate', suite.state.ns, published.moduleTemplate.metadata.name),
        body: {
          spec: {
            manager: {
              group: 'apps',
              version: 'v1',
              kind: 'Deployment',
              name: `${module}-manager`,
              namespace: 'kyma-system',
            },
          },
        },
      },
      mergePatch,
    );
    const secretName = `${module}-registry`;
    await suite.kyma('k8', [{ name: module }]);
    await suite.start({ settings: { ...suite.settings(), skrImagePullSecret: secretName } });
    await suite.reconcileUntil(
      'k8',
      async () =>
        (await suite.kcpKyma('k8')).status?.conditions?.some(
          (c: Json) => c.type === 'SKRImagePullSecret' && c.reason === 'SecretMissing',
        ) ?? false,
      'SKRImagePullSecret SecretMissing',
    );
    expect((await suite.kcpKyma('k8')).status.state).to.equal('Warning');

    const data = { '.dockerconfigjson': Buffer.from('{"auths":{"example.test":{}}}').toString('base64') };
    await planes.kcp.makeApiClient(CoreV1Api).createNamespacedSecret({
      namespace: suite.state.ns,
      body: { metadata: { name: secretName }, type: 'kubernetes.io/dockerconfigjson', data },
    });
    const apps = planes.skr.makeApiClient(AppsV1Api);
    const workload = (name: string) =>
      getOrUndefined(() => apps.readNamespacedDeployment({ name, namespace: 'kyma-system' }));
    await suite.reconcileUntil(
      'k8',
      async () =>
        (await suite.kcpKyma('k8')).status?.conditions?.some(
          (c: Json) => c.type === 'SKRImagePullSecret' && c.status === 'True',
        ) && (await workload(`${module}-worker`)) !== undefined,
      'Secret copied and module applied',
    );
    const copy = await skrCore().readNamespacedSecret({ name: secretName, namespace: 'kyma-system' });
    expect(copy.type).to.equal('kubernetes.io/dockerconfigjson');
    expect(copy.data).to.deep.equal(data);
    for (const name of [`${module}-manager`, `${module}-worker`]) {
      expect((await workload(name))?.spec?.template.spec?.imagePullSecrets).to.deep.equal([
        { name: secretName },
      ]);
    }
    const envOf = async (name: string) => (await workload(name))?.spec?.template.spec?.containers[0]?.env;
    expect(await envOf(`${module}-manager`)).to.deep.equal([
      { name: MODULE_OBJECT_METADATA.pullSecretEnv, value: secretName },
    ]);
    expect(await envOf(`${module}-worker`)).to.equal(undefined);

    // A change in the KCP reaches the copy at the next pass; an unchanged one is not written again.
    const rotated = {
      '.dockerconfigjson': Buffer.from('{"auths":{"example.test":{"auth":"eDp5"}}}').toString('base64'),
    };
    await planes.kcp.makeApiClient(CoreV1Api).replaceNamespacedSecret({
      name: secretName,
      namespace: suite.state.ns,
      body: { metadata: { name: secretName }, type: 'kubernetes.io/dockerconfigjson', data: rotated },
    });
    await suite.state.manager!.reconciler.reconcile(`${suite.state.ns}/k8`);
    const after = await skrCore().readNamespacedSecret({ name: secretName, namespace: 'kyma-system' });
    expect(after.data).to.deep.equal(rotated);
    await suite.state.manager!.reconciler.reconcile(`${suite.state.ns}/k8`);
    expect(
      (await skrCore().readNamespacedSecret({ name: secretName, namespace: 'kyma-system' })).metadata
        ?.resourceVersion,
    ).to.equal(after.metadata?.resourceVersion);

    // The Kyma's deletion takes the copy with it.
    await deleteKyma('k8');
    const pullSecretCopy = () =>
      getOrUndefined(() => skrCore().readNamespacedSecret({ name: secretName, namespace: 'kyma-system' }));
    expect(await pullSecretCopy()).to.equal(undefined);
  });

  it('adds the finalizers a Manifest lacks when another write came between the read and the patch; its Manifest carries the bucket label from the start', async function () {
    const module = unique('finis');
    await suite.publish({ moduleName: module, version: '1.0.0', rawManifest: rawManifest(module) });
    await suite.kyma('k1', [{ name: module }]);
    await suite.start();
    await untilModuleReady('k1', module);
    const ref = refTo(
      'manifest',
      suite.state.ns,
      manifestName(`kyma-project.io/module/${module}`, 'k1', module),
    );
    const patch = (body: object) => suite.api().patchNamespacedCustomObject({ ...ref, body }, mergePatch);
    expect(((await suite.api().getNamespacedCustomObject(ref)) as Json).metadata.labels).to.include({
      [LABELS.shardBucket]: String(bucketOf('k1')),
    });

    // A pass reads the Manifest without its finalizers; another writer changes it before the pass's patch.
    await patch({ metadata: { finalizers: null } });
    const read = parseManifest(await suite.api().getNamespacedCustomObject(ref), 'Manifest');
    await patch({ metadata: { labels: { 'example.com/another-writer': 'was-first' } } });
    const wanted = [MANIFEST.finalizer];
    const kcp = await createClusterClient(suite.planes.kcp);
    try {
      const written = await ensureFinalizers({ kcp, logger: silentLogger() }, read, wanted);
      expect(written.metadata.finalizers).to.include.members(wanted);
    } finally {
      await kcp.close();
    }
    const stored = (await suite.api().getNamespacedCustomObject(ref)) as Json;
    expect(stored.metadata.finalizers).to.include.members(wanted);
    expect(stored.metadata.labels['example.com/another-writer']).to.equal('was-first');
  });

  it("marks the Manifests of a Kyma that is gone Error (orphaned) and leaves the module's objects in the SKR", async function () {
    const module = unique('orphan');
    await suite.publish({
      moduleName: module,
      version: '1.0.0',
      rawManifest: rawManifest(module, `${module}-config`),
    });
    await suite.kyma('k9', [{ name: module }]);
    await suite.start();
    await untilModuleReady('k9', module);
    // Someone removes the Kyma's finalizer by hand: the Kyma goes without its deletion ever running.
    await suite
      .api()
      .patchNamespacedCustomObject(
        { ...kymaRef(suite.state.ns, 'k9'), body: { metadata: { finalizers: null } } },
        mergePatch,
      );
    await suite.api().deleteNamespacedCustomObject(kymaRef(suite.state.ns, 'k9'));
    await waitUntil(
      'Kyma gone',
      async () =>
        (await getOrUndefined(() => suite.api().getNamespacedCustomObject(kymaRef(suite.state.ns, 'k9')))) ===
        undefined,
    );
    await suite.state.manager!.reconciler.reconcile(`${suite.state.ns}/k9`);
    const [manifest] = await suite.manifests();
    expect(manifest?.status.state).to.equal('Error');
    expect(manifest?.status.lastOperation.operation).to.match(/^orphaned: Kyma .*\/k9 does not exist/);
    expect(await configMap(`${module}-config`)).to.not.equal(undefined);
  });

  it('leaves the objects of a module turned unmanaged in the SKR and removes its Manifest, with an Event', async function () {
    const module = unique('eps');
    await suite.publish({
      moduleName: module,
      version: '1.0.0',
      rawManifest: rawManifest(module, `${module}-config`),
    });
    await suite.kyma('k5', [{ name: module }]);
    await suite.start();
    await suite.reconcileUntil(
      'k5',
      async () => (await suite.moduleStatus('k5', module))?.state === 'Ready',
      'Ready',
    );
    await suite.skrModules([{ name: module, managed: false }]);
    await suite.reconcileUntil(
      'k5',
      async () =>
        (await suite.moduleStatus('k5', module))?.state === 'Unmanaged' &&
        (await suite.manifests()).length === 0,
      'Unmanaged, Manifest gone',
    );
    const left = await configMap(`${module}-config`);
    expect(left, 'the object stays in the SKR').to.not.equal(undefined);
    expect(left?.metadata?.labels ?? {}, 'the managed-by label is gone').to.not.have.property(
      MODULE_OBJECT_METADATA.managedByLabel,
    );
    const events = await planes.kcp
      .makeApiClient(CoreV1Api)
      .listNamespacedEvent({ namespace: suite.state.ns });
    expect(events.items.map((e) => e.reason)).to.include('ModuleUnmanaged');
  });

  it('adopts a Manifest upstream lifecycle-manager wrote and installed: same object, nothing doubled', async function () {
    const module = unique('zeta');
    const published = await suite.publish({
      moduleName: module,
      version: '1.0.0',
      rawManifest: rawManifest(module, `${module}-config`),
    });
    const kcpKyma = await suite.kyma('k6', [{ name: module }]);
    const component = `kyma-project.io/module/${module}`;
    const name = manifestName(component, 'k6', module);
    const { group, kind } = kindOf(module);
    // What upstream leaves behind: its Manifest (under its field manager, finalizers, status) and the SKR objects
    // its applier wrote.
    await skrCore().createNamespacedConfigMap({
      namespace: 'kyma-system',
      body: {
        metadata: {
          name: `${module}-config`,
          namespace: 'kyma-system',
          labels: { [LABELS.managedBy]: 'kyma' },
        },
      },
      fieldManager: LIFECYCLE_MANAGER.applyFieldManager,
    });
    const created = (await suite.api().createNamespacedCustomObject({
      ...refTo('manifest', suite.state.ns, name),
      fieldManager: MANIFEST.kymaFieldManager,
      body: {
        apiVersion: `${GROUP}/${KINDS.manifest.version}`,
        kind: KINDS.manifest.kind,
        metadata: {
          name,
          namespace: suite.state.ns,
          labels: {
            [LABELS.kymaName]: 'k6',
            [LABELS.moduleName]: module,
            [LABELS.channel]: 'regular',
            [LABELS.managedBy]: MANIFEST.managedBy,
          },
          annotations: { [ANNOTATIONS.ocmComponentName]: component, [ANNOTATIONS.fqdn]: component },
          finalizers: LIFECYCLE_MANAGER.finalizers.slice(0, 2),
          ownerReferences: [
            {
              apiVersion: `${GROUP}/v1beta2`,
              kind: 'Kyma',
              name: 'k6',
              uid: kcpKyma.metadata.uid,
              controller: true,
              blockOwnerDeletion: true,
            },
          ],
        },
        spec: {
          remote: false,
          version: '1.0.0',
          install: {
            name: 'raw-manifest',
            // Written before 2025-10: the repo still carries /component-descriptors.
            source: {
              repo: `${suite.state.registry.host}/component-descriptors`,
              name: component,
              ref: published.component.layers.find((layer) => layer.name === 'raw-manifest')!.digest,
              type: 'oci-dir',
            },
          },
        },
      },
    })) as Json;
    await suite.api().patchNamespacedCustomObjectStatus(
      {
        ...refTo('manifest', suite.state.ns, name),
        body: {
          status: {
            state: 'Ready',
            synced: [
              {
                group: '',
                version: 'v1',
                kind: 'ConfigMap',
                name: `${module}-config`,
                namespace: 'kyma-system',
              },
            ],
          },
        },
      },
      mergePatch,
    );
    await suite.start();
    await suite.reconcileUntil(
      'k6',
      async () => (await suite.moduleStatus('k6', module))?.state === 'Ready',
      'Ready',
    );
    const all = await suite.manifests();
    expect(all.map((m) => m.metadata.name)).to.deep.equal([name]);
    expect(all[0]!.metadata.uid).to.equal(created.metadata.uid);
    expect(all[0]!.status.synced.map((s: Json) => s.kind).sort()).to.deep.equal([
      'ConfigMap',
      'CustomResourceDefinition',
    ]);
    const crd = await getOrUndefined(() =>
      custom(planes.skr).listClusterCustomObject({ group, version: 'v1', plural: `${kind.toLowerCase()}s` }),
    );
    expect(crd, 'the CRD of the adopted set is served').to.not.equal(undefined);
  });
  it('runs from the flags: skr-agent work with --oci-registry-host installs a module, and a Manifest deleted by hand comes back (Manifest watch)', async function () {
    const module = unique('eta');
    await suite.publish({
      moduleName: module,
      version: '1.0.0',
      rawManifest: rawManifest(module, `${module}-config`),
    });
    await suite.kyma('k7', [{ name: module }]);
    const kcp = await kubeConfigAsAgent(planes.kcp, suite.state.ns);
    // Only watches wake passes here: a Ready Kyma is looked at again after 10 minutes.
    const config = agentConfigFromFlags(
      testRunFlags(suite.state.ns, {
        requeueReady: '10m',
        requeueProcessing: '1s',
        requeueWarning: '1s',
        requeueError: '1s',
        ociRegistryHost: `http://${suite.state.registry.host}`,
      }),
    );
    expect(config.modules?.registryHost).to.equal(`http://${suite.state.registry.host}`);
    const pool = await pooledKubeConfig(kcp);
    const events = createEventStream();
    const work = await startWork(config, kcp, silentLogger(), createRegistry(), events, pool);
    planes.cleanups.push(async () => {
      await work.stop();
      await events.close();
      await pool.close();
    });
    const name = manifestName(`kyma-project.io/module/${module}`, 'k7', module);
    const readyManifest = async () =>
      (
        (await getOrUndefined(() =>
          suite.api().getNamespacedCustomObject(refTo('manifest', suite.state.ns, name)),
        )) as Json | undefined
      )?.status?.state === 'Ready';
    await waitUntil(
      'module Ready',
      async () => (await suite.moduleStatus('k7', module))?.state === 'Ready',
      120_000,
    );
    expect(await configMap(`${module}-config`)).to.not.equal(undefined);

    // Deleted by hand: its removal and its return are driven by the Manifest watch alone.
    const first = (await suite
      .api()
      .getNamespacedCustomObject(refTo('manifest', suite.state.ns, name))) as Json;
    await suite.api().deleteNamespacedCustomObject(refTo('manifest', suite.state.ns, name));
    await waitUntil(
      'a new Manifest Ready',
      async () => {
        const now = (await getOrUndefined(() =>
          suite.api().getNamespacedCustomObject(refTo('manifest', suite.state.ns, name)),
        )) as Json | undefined;
        return now !== undefined && now.metadata.uid !== first.metadata.uid && (await readyManifest());
      },
      120_000,
    );
    expect(await configMap(`${module}-config`)).to.not.equal(undefined);
  });

  it('removes every module of a deleted Kyma before the Kyma goes', async function () {
    const module = unique('theta');
    await suite.publish({
      moduleName: module,
      version: '1.0.0',
      rawManifest: rawManifest(module, `${module}-config`),
      defaultCr: defaultCr(module),
    });
    await suite.kyma('k8', [{ name: module }]);
    await suite.start();
    await suite.reconcileUntil(
      'k8',
      async () => (await suite.moduleStatus('k8', module))?.state === 'Ready',
      'Ready',
    );
    await deleteKyma('k8');
    expect(await suite.manifests()).to.deep.equal([]);
    expect(await configMap(`${module}-config`)).to.equal(undefined);
    expect(await moduleCr(module, `${module}-default`)).to.equal(undefined);
  });
});
