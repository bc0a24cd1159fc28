// Taking over Manifests upstream lifecycle-manager installed (decision 028), on a real KCP, a real SKR and a real
// registry: the KCP and SKR are seeded exactly as lifecycle-manager leaves them (its Manifest with its labels,
// annotations, finalizers, status.synced and field managers; its applier's objects in the SKR with its transforms;
// the default CR it created; a user's CR), then `skr-agent takeover`'s steps run, then the agent reconciles.
import { expect } from 'chai';
import { parse } from 'yaml';
import { CoreV1Api, PatchStrategy, setHeaderOptions, type KubernetesObject } from '@kubernetes/client-node';
import { GROUP, KINDS, LIFECYCLE_MANAGER, MANIFEST, manifestName, type SyncedObject } from '@skr-watcher/api';
import {
  applyObject,
  createClusterClient,
  createSkrClients,
  readObject,
  refOfSynced,
  type ClusterClient,
} from '@skr-watcher/kube';
import { silentLogger } from '@skr-watcher/telemetry';
import { takeOverKyma, type KymaTakeover } from '../src/takeover/index.js';
import { spawnAgent } from './support/agent-child.js';
import { custom, getOrUndefined, refTo } from './support/planes.js';
import { crdYaml, docs, mergePatch, moduleSuite, type Json } from './support/modules.js';

const serverSideApply = setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply);

/** Lifecycle-manager's marks on every object it renders into an SKR (its render transforms). */
function asLifecycleManagerRenders(object: Json, namespace: string, manifest: string): Json {
  return {
    ...object,
    metadata: {
      ...object.metadata,
      labels: {
        ...object.metadata.labels,
        'operator.kyma-project.io/managed-by': 'kyma',
        'app.kubernetes.io/component': manifest,
        'app.kubernetes.io/part-of': 'Kyma',
      },
      annotations: {
        ...object.metadata.annotations,
        'deprecated-operator.kyma-project.io/owned-by': `${namespace}/${manifest}`,
        'operator.kyma-project.io/managed-by-reconciler-disclaimer':
          'DO NOT EDIT - This resource is managed by Kyma.\nAny modifications are discarded and the resource is reverted to the original state.',
      },
    },
  };
}

/** An object's content: everything but its resourceVersion and managed fields. */
function contentOf(object: KubernetesObject | undefined): Json {
  const { managedFields: _fields, resourceVersion: _version, ...metadata } = (object?.metadata ?? {}) as Json;
  return { ...(object as Json), metadata };
}

const managersOf = (object: KubernetesObject | undefined) =>
  ((object?.metadata?.managedFields ?? []) as Json[]).map((entry) => entry.manager as string);

/**
 * `after` is `before` with the fields lifecycle-manager's applier owned now owned by `owner` alone (an Apply
 * entry), and nothing else changed: uid and content.
 */
function expectOwnershipMoved(
  before: (KubernetesObject | undefined)[],
  after: (KubernetesObject | undefined)[],
  owner: string,
): void {
  const other =
    owner === MANIFEST.applyFieldManager ? LIFECYCLE_MANAGER.applyFieldManager : MANIFEST.applyFieldManager;
  after.forEach((object, index) => {
    const old = before[index]!;
    const what = `${object?.kind} ${object?.metadata?.name}`;
    expect(object?.metadata?.uid, what).to.equal(old.metadata?.uid);
    expect(contentOf(object), what).to.deep.equal(contentOf(old));
    expect(managersOf(object), what).to.not.include(other);
    const entry = (object?.metadata?.managedFields as Json[]).find((e) => e.manager === owner);
    const original = (old.metadata?.managedFields as Json[]).find(
      (e) => e.manager === LIFECYCLE_MANAGER.applyFieldManager,
    );
    expect(entry?.operation, what).to.equal('Apply');
    expect(entry?.fieldsV1, `${what}: ${owner} owns what lifecycle-manager owned`).to.deep.equal(
      original?.fieldsV1,
    );
  });
}

describe('skr-agent takeover: Manifests lifecycle-manager installed, adopted in place', function () {
  this.timeout(300_000);
  const suite = moduleSuite();
  const { planes } = suite;
  let kcp: ClusterClient;
  let skr: ClusterClient;
  beforeEach(async function () {
    kcp = await createClusterClient(planes.kcp);
    skr = await createClusterClient(planes.skr);
    await applyObject(
      skr.objects,
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'kyma-system' } },
      { fieldManager: 'test' },
    );
  });
  afterEach(async function () {
    await kcp.close();
    await skr.close();
  });

  /** Module names are lower-case letters: one suffix per test. */
  const unique = (base: string) => `${base}${String.fromCharCode(97 + (suite.state.counter % 26)).repeat(3)}`;

  /** The module's objects (raw manifest): its CRD and two ConfigMaps, as plain objects. */
  function moduleObjects(module: string, version: 1 | 2) {
    const group = `${module}.test.io`;
    const kind = `${module[0]!.toUpperCase()}${module.slice(1)}`;
    const plural = `${kind.toLowerCase()}s`;
    const crd = parse(crdYaml(group, kind)) as Json;
    const configMap = (name: string, data: Record<string, string>) => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name, namespace: 'kyma-system' },
      data,
    });
    // Version 2 drops a key of the first ConfigMap and the second ConfigMap altogether.
    const objects =
      version === 1
        ? [
            crd,
            configMap(`${module}-config`, { kept: 'yes', dropped: 'in 2.0.0' }),
            configMap(`${module}-extra`, {}),
          ]
        : [crd, configMap(`${module}-config`, { kept: 'yes' })];
    return { group, kind, plural, objects };
  }

  /**
   * Publishes the module, creates the Kyma, and installs the module as lifecycle-manager does: its applier
   * server-side applies the rendered objects, its Kyma reconciler applies the Manifest, its finalizers and status
   * are applied under its field managers, the default CR is created once; a user creates a CR of the kind.
   */
  async function installedByLifecycleManager(kymaName: string, module: string) {
    const published = await suite.publish({
      moduleName: module,
      version: '1.0.0',
      rawManifest: docs(...moduleObjects(module, 1).objects.map((object) => `${JSON.stringify(object)}\n`)),
      defaultCr: `apiVersion: ${module}.test.io/v1\nkind: ${moduleObjects(module, 1).kind}\nmetadata:\n  name: ${module}-default\n  namespace: kyma-system\nspec:\n  greeting: hello\n`,
    });
    const kyma = await suite.kyma(kymaName, [{ name: module }]);
    const ns = suite.state.ns;
    const component = `kyma-project.io/module/${module}`;
    const name = manifestName(component, kymaName, module);
    const { group, kind, plural, objects } = moduleObjects(module, 1);
    const ref = published.component.layers.find((layer) => layer.name === 'raw-manifest')!.digest;

    const synced: SyncedObject[] = [];
    for (const object of objects) {
      const applied = await applyObject(skr.objects, asLifecycleManagerRenders(object, ns, name), {
        fieldManager: LIFECYCLE_MANAGER.applyFieldManager,
        force: true,
      });
      const [g, v] = applied.apiVersion!.includes('/')
        ? applied.apiVersion!.split('/')
        : ['', applied.apiVersion!];
      synced.push({
        group: g!,
        version: v!,
        kind: applied.kind!,
        name: applied.metadata!.name!,
        namespace: applied.metadata?.namespace ?? '',
      });
    }
    const defaultCr = {
      apiVersion: `${group}/v1`,
      kind,
      metadata: { name: `${module}-default`, namespace: 'kyma-system' },
      spec: { greeting: 'hello' },
    };
    await untilServed(group, plural);
    await custom(planes.skr).createNamespacedCustomObject({
      group,
      version: 'v1',
      plural,
      namespace: 'kyma-system',
      body: defaultCr,
      fieldManager: 'resource.kyma-project.io/finalizer',
    });
    await custom(planes.skr).createNamespacedCustomObject({
      group,
      version: 'v1',
      plural,
      namespace: 'kyma-system',
      body: { ...defaultCr, metadata: { name: `${module}-users`, namespace: 'kyma-system' } },
    });

    const manifestRef = { apiVersion: `${GROUP}/${KINDS.manifest.version}`, kind: KINDS.manifest.kind };
    const meta = { name, namespace: ns };
    await applyObject(
      kcp.objects,
      {
        ...manifestRef,
        metadata: {
          ...meta,
          labels: {
            'operator.kyma-project.io/kyma-name': kymaName,
            'operator.kyma-project.io/module-name': module,
            'operator.kyma-project.io/channel': 'regular',
            'operator.kyma-project.io/managed-by': 'lifecycle-manager',
            'operator.kyma-project.io/controller-name': '',
          },
          annotations: {
            'operator.kyma-project.io/ocm-component-name': component,
            'operator.kyma-project.io/fqdn': component,
          },
          ownerReferences: [
            {
              apiVersion: `${GROUP}/v1beta2`,
              kind: 'Kyma',
              name: kymaName,
              uid: kyma.metadata.uid,
              controller: true,
              blockOwnerDeletion: true,
            },
          ],
        },
        spec: {
          customResourcePolicy: 'CreateAndDelete',
          remote: false,
          version: '1.0.0',
          install: {
            name: 'raw-manifest',
            source: { repo: suite.state.registry.host, name: component, ref, type: 'oci-dir' },
          },
          resource: defaultCr,
        },
      } as KubernetesObject,
      { fieldManager: 'lifecycle-manager', force: true },
    );
    const finalizers = (fieldManager: string, values: readonly string[]) =>
      applyObject(
        kcp.objects,
        { ...manifestRef, metadata: { ...meta, finalizers: [...values] } },
        { fieldManager },
      );
    await finalizers(LIFECYCLE_MANAGER.applyFieldManager, LIFECYCLE_MANAGER.finalizers.slice(0, 2));
    await finalizers('resource.kyma-project.io/finalizer', LIFECYCLE_MANAGER.finalizers.slice(2));
    await custom(planes.kcp).patchNamespacedCustomObject(
      { ...refTo('manifest', ns, name), body: { metadata: { annotations: { 'sync-oci-ref': ref } } } },
      mergePatch,
    );
    const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const condition = (type: string, reason: string, message: string) => ({
      type,
      reason,
      message,
      status: 'True',
      lastTransitionTime: now,
    });
    await custom(planes.kcp).patchNamespacedCustomObjectStatus(
      {
        ...refTo('manifest', ns, name),
        fieldManager: LIFECYCLE_MANAGER.applyFieldManager,
        force: true,
        body: {
          ...manifestRef,
          metadata: meta,
          status: {
            state: 'Ready',
            lastOperation: { operation: 'resources are ready', lastUpdateTime: now },
            conditions: [
              condition('Resources', 'ResourcesAvailable', 'resources are parsed and ready for use'),
              condition('Installation', 'Ready', 'installation is ready and resources can be used'),
              condition('ModuleCR', 'ModuleCRCreated', 'module CR was created'),
            ],
            synced,
          },
        },
      },
      serverSideApply,
    );
    return { name, synced, group, plural, kind };
  }

  async function untilServed(group: string, plural: string): Promise<void> {
    for (let attempt = 0; attempt < 100; attempt++) {
      const served = await getOrUndefined(() =>
        custom(planes.skr).listNamespacedCustomObject({
          group,
          version: 'v1',
          plural,
          namespace: 'kyma-system',
        }),
      ).catch(() => undefined);
      if (served) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`${plural}.${group} never served`);
  }

  async function takeOver(kymaName: string, handBack = false): Promise<KymaTakeover> {
    const skrClients = createSkrClients({ kcp, namespace: suite.state.ns });
    try {
      const kyma = (await suite.kcpKyma(kymaName)) as never;
      return await takeOverKyma(
        { kcp, skrClients, namespace: suite.state.ns, manifestsOnly: true, handBack, logger: silentLogger() },
        kyma,
      );
    } finally {
      await skrClients.close();
    }
  }

  const readAll = (refs: readonly SyncedObject[]) =>
    Promise.all(refs.map((synced) => readObject(skr.objects, refOfSynced(synced))));

  it("moves the SKR objects to the agent's field manager in one write each, content and uid unchanged; swaps the finalizers; the agent's next pass writes nothing", async function () {
    const module = unique('alpha');
    const { name, synced, group, plural } = await installedByLifecycleManager('k1', module);
    const crs = () =>
      Promise.all(
        [`${module}-default`, `${module}-users`].map((cr) =>
          custom(planes.skr).getNamespacedCustomObject({
            group,
            version: 'v1',
            plural,
            namespace: 'kyma-system',
            name: cr,
          }),
        ),
      ) as Promise<Json[]>;
    const before = await readAll(synced);
    const crsBefore = await crs();
    for (const object of before) expect(managersOf(object)).to.include(LIFECYCLE_MANAGER.applyFieldManager);

    const result = await takeOver('k1');
    expect(result.error).to.equal(undefined);
    expect(result.manifests).to.have.length(1);
    expect(result.manifests[0]!.objects).to.deep.equal({ moved: synced.length, unchanged: 0, absent: 0 });

    const after = await readAll(synced);
    expectOwnershipMoved(before, after, MANIFEST.applyFieldManager);
    after.forEach((object, index) =>
      expect(object?.metadata?.resourceVersion, 'the ownership move is one write').to.not.equal(
        before[index]!.metadata?.resourceVersion,
      ),
    );
    // Users' CRs (the default CR included) are not touched.
    expect((await crs()).map((cr) => cr.metadata.resourceVersion)).to.deep.equal(
      crsBefore.map((cr) => cr.metadata.resourceVersion),
    );

    const manifest = (await suite
      .api()
      .getNamespacedCustomObject(refTo('manifest', suite.state.ns, name))) as Json;
    expect(manifest.metadata.finalizers).to.deep.equal([MANIFEST.finalizer]);
    expect(managersOf(manifest)).to.not.include(LIFECYCLE_MANAGER.applyFieldManager);
    expect(manifest.status.synced).to.deep.equal(synced);

    // Again: nothing left to move, nothing written.
    const again = await takeOver('k1');
    expect(again.manifests[0]!.objects).to.deep.equal({ moved: 0, unchanged: synced.length, absent: 0 });
    expect((await readAll(synced)).map((o) => o?.metadata?.resourceVersion)).to.deep.equal(
      after.map((o) => o?.metadata?.resourceVersion),
    );

    // The agent adopts the module: Ready, without one write to its objects.
    await suite.start();
    await suite.reconcileUntil(
      'k1',
      async () => (await suite.moduleStatus('k1', module))?.state === 'Ready',
      'Ready',
    );
    expect((await readAll(synced)).map((o) => o?.metadata?.resourceVersion)).to.deep.equal(
      after.map((o) => o?.metadata?.resourceVersion),
    );
    const all = await suite.manifests();
    expect(all.map((m) => m.metadata.uid)).to.deep.equal([manifest.metadata.uid]);
  });

  it('prunes across the handover: an upgrade drops the object and the field lifecycle-manager installed; removal then removes everything it installed', async function () {
    const module = unique('beta');
    const { name, synced, group, plural } = await installedByLifecycleManager('k2', module);
    await takeOver('k2');
    await suite.start();
    await suite.reconcileUntil(
      'k2',
      async () => (await suite.moduleStatus('k2', module))?.state === 'Ready',
      'Ready',
    );

    await suite.publish({
      moduleName: module,
      version: '2.0.0',
      rawManifest: docs(...moduleObjects(module, 2).objects.map((object) => `${JSON.stringify(object)}\n`)),
      defaultCr: `apiVersion: ${module}.test.io/v1\nkind: ${moduleObjects(module, 2).kind}\nmetadata:\n  name: ${module}-default\n  namespace: kyma-system\nspec:\n  greeting: hello\n`,
    });
    const config = () =>
      getOrUndefined(() =>
        planes.skr
          .makeApiClient(CoreV1Api)
          .readNamespacedConfigMap({ name: `${module}-config`, namespace: 'kyma-system' }),
      );
    const extra = () =>
      getOrUndefined(() =>
        planes.skr
          .makeApiClient(CoreV1Api)
          .readNamespacedConfigMap({ name: `${module}-extra`, namespace: 'kyma-system' }),
      );
    await suite.reconcileUntil(
      'k2',
      async () => {
        const entry = await suite.moduleStatus('k2', module);
        return entry?.version === '2.0.0' && entry.state === 'Ready';
      },
      '2.0.0 Ready',
    );
    expect(await extra(), 'the object 2.0.0 dropped is pruned').to.equal(undefined);
    expect((await config())?.data, 'the field 2.0.0 dropped is gone').to.deep.equal({ kept: 'yes' });

    // Removal: the user's CR goes, the module leaves the Kyma; everything lifecycle-manager installed goes with it.
    await custom(planes.skr).deleteNamespacedCustomObject({
      group,
      version: 'v1',
      plural,
      namespace: 'kyma-system',
      name: `${module}-users`,
    });
    await suite.skrModules([]);
    await suite.reconcileUntil('k2', async () => (await suite.manifests()).length === 0, 'Manifest removed');
    const left = (await readAll(synced)).filter((object) => object !== undefined);
    expect(
      left.map((o) => `${o?.kind} ${o?.metadata?.name}`),
      'nothing lifecycle-manager installed is left',
    ).to.deep.equal([]);
    expect(
      await getOrUndefined(() =>
        suite.api().getNamespacedCustomObject(refTo('manifest', suite.state.ns, name)),
      ),
    ).to.equal(undefined);
  });

  it("hands a Manifest back: lifecycle-manager's finalizers and field manager return, content unchanged", async function () {
    const module = unique('gamma');
    const { name, synced } = await installedByLifecycleManager('k3', module);
    const before = await readAll(synced);
    await takeOver('k3');
    const back = await takeOver('k3', true);
    expect(back.manifests[0]!.objects).to.deep.equal({ moved: synced.length, unchanged: 0, absent: 0 });
    expectOwnershipMoved(before, await readAll(synced), LIFECYCLE_MANAGER.applyFieldManager);
    const manifest = (await suite
      .api()
      .getNamespacedCustomObject(refTo('manifest', suite.state.ns, name))) as Json;
    expect(manifest.metadata.finalizers).to.have.members([...LIFECYCLE_MANAGER.finalizers]);
  });

  it('runs as skr-agent takeover: --dry-run writes nothing and says what it would move; then one run takes the Kyma over, exit 0', async function () {
    const module = unique('delta');
    const { name, synced } = await installedByLifecycleManager('k4', module);
    const before = await readAll(synced);
    const command = async (...flags: string[]) => {
      const agent = spawnAgent([
        'takeover',
        '--kubeconfig',
        planes.env.plane('kcp').kubeconfigPath,
        '--namespace',
        suite.state.ns,
        '--kyma',
        'k4',
        '--manifests-only',
        ...flags,
      ]);
      const code = await agent.exited;
      return { code, output: agent.output() };
    };

    const dry = await command('--dry-run');
    expect(dry.code, dry.output).to.equal(0);
    const line = JSON.parse(dry.output.trim().split('\n').pop()!) as KymaTakeover;
    expect(line.kyma).to.equal('k4');
    expect(line.manifests[0]).to.deep.include({ finalizers: true });
    expect(line.manifests[0]!.objects).to.deep.equal({ moved: synced.length, unchanged: 0, absent: 0 });
    expect((await readAll(synced)).map((o) => o?.metadata?.resourceVersion)).to.deep.equal(
      before.map((o) => o?.metadata?.resourceVersion),
    );

    const real = await command();
    expect(real.code, real.output).to.equal(0);
    expectOwnershipMoved(before, await readAll(synced), MANIFEST.applyFieldManager);
    const manifest = (await suite
      .api()
      .getNamespacedCustomObject(refTo('manifest', suite.state.ns, name))) as Json;
    expect(manifest.metadata.finalizers).to.deep.equal([MANIFEST.finalizer]);
  });
});
