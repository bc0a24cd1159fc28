// The object-set engine on a real kube-apiserver: apply order (CRD before its CR in one set), prune only after the
// new set applied, pruning on any change of the set, two-phase removal, readiness of every workload, namespaces
// set against discovery, the caller's guard, one holder per object (refused to a second set, left to it on removal;
// an object the user made before is adopted and let go with its data).
import { expect } from 'chai';
import {
  AppsV1Api,
  CoreV1Api,
  PatchStrategy,
  Watch,
  setHeaderOptions,
  type KubeConfig,
  type KubernetesObject,
  type V1Deployment,
} from '@kubernetes/client-node';
import { sharedEnvironment } from '@skr-watcher/testenv';
import {
  applyObjectSet,
  createClusterClient,
  managedByOwnedBy,
  manifestHolder,
  readinessOfSet,
  readObject,
  removeObjects,
  syncedObjectOf,
  type ClusterClient,
  type SetMember,
  type SyncedObject,
} from '../src/index.js';

const MANAGER = 'object-set-test';
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
let seq = 0;

function configMap(namespace: string, name: string, data: Record<string, string> = { a: '1' }): SetMember {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace }, data };
}

function deployment(namespace: string, name: string, labels: Record<string, string> = {}): SetMember {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace, labels: { app: name, ...labels } },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name, ...labels } },
        spec: { containers: [{ name: 'main', image: 'registry.example.com/operator:1.0.0' }] },
      },
    },
  };
}

function crd(group: string): SetMember {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `widgets.${group}` },
    spec: {
      group,
      scope: 'Namespaced',
      names: { plural: 'widgets', singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: { spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
            },
          },
        },
      ],
    },
  };
}

const desired = (objects: SetMember[]) => objects.map((object) => ({ object }));

describe('object-set engine (real API server)', function () {
  this.timeout(120_000);
  let kc: KubeConfig;
  let skr: ClusterClient;
  let core: CoreV1Api;
  let apps: AppsV1Api;
  let ns: string;
  const cleanups: (() => Promise<unknown>)[] = [];

  before(async function () {
    this.timeout(600_000); // planes start slowly on a loaded machine
    const env = await sharedEnvironment();
    kc = env.plane('skr1').kubeConfig();
    skr = await createClusterClient(kc, { name: 'skr1', timeoutMs: 15_000 });
    core = kc.makeApiClient(CoreV1Api);
    apps = kc.makeApiClient(AppsV1Api);
  });

  after(async function () {
    await skr?.close();
  });

  beforeEach(async function () {
    seq += 1;
    ns = `objset-${process.pid}-${seq}`;
    await core.createNamespace({ body: { metadata: { name: ns } } });
  });

  afterEach(async function () {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
    await core.deleteNamespace({ name: ns }).catch(() => undefined);
  });

  it('applies a CRD and a CR of it in one pass: the CR waits until the CRD is Established', async function () {
    const group = `objset${process.pid}x${seq}.example.com`;
    const widget: SetMember = {
      apiVersion: `${group}/v1`,
      kind: 'Widget',
      metadata: { name: 'w', namespace: ns },
      spec: { size: 3 },
    };
    cleanups.push(() => skr.apiextensions.deleteCustomResourceDefinition({ name: `widgets.${group}` }));
    // The CR comes first in the set, as it may in a module's YAML.
    const result = await applyObjectSet(
      skr,
      { objects: desired([widget, crd(group)]), inventory: [] },
      { fieldManager: MANAGER },
    );
    expect(
      result.results.map((r) => [r.object.kind, r.outcome]),
      JSON.stringify(result.results),
    ).to.deep.equal([
      ['Widget', 'applied'],
      ['CustomResourceDefinition', 'applied'],
    ]);
    expect(result.state).to.equal('done');
    expect(
      await readObject(skr.objects, { apiVersion: `${group}/v1`, kind: 'Widget', name: 'w', namespace: ns }),
    ).to.not.equal(undefined);
    expect(result.inventory).to.deep.include({
      group,
      version: 'v1',
      kind: 'Widget',
      name: 'w',
      namespace: ns,
    });
    expect(result.inventory).to.deep.include({
      group: 'apiextensions.k8s.io',
      version: 'v1',
      kind: 'CustomResourceDefinition',
      name: `widgets.${group}`,
      namespace: '',
    });
  });

  it('reports a CR "waiting" (not failed) while its CRD cannot become Established, and prunes nothing then', async function () {
    const group = `objsetw${process.pid}x${seq}.example.com`;
    // Two CRDs claiming the same plural: the second is never Established (names not accepted).
    const first = crd(group);
    const second = structuredClone(crd(group));
    second.metadata.name = `gadgets.${group}`;
    (second['spec'] as { names: Record<string, string> }).names = {
      plural: 'gadgets',
      singular: 'gadget',
      kind: 'Widget',
      listKind: 'WidgetList',
    };
    cleanups.push(() => skr.apiextensions.deleteCustomResourceDefinition({ name: `widgets.${group}` }));
    cleanups.push(() => skr.apiextensions.deleteCustomResourceDefinition({ name: `gadgets.${group}` }));
    await applyObjectSet(skr, { objects: desired([first]), inventory: [] }, { fieldManager: MANAGER });
    await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'old' } } });
    const old = syncedObjectOf(configMap(ns, 'old'));
    const result = await applyObjectSet(
      skr,
      {
        objects: desired([
          second,
          { apiVersion: `${group}/v1`, kind: 'Widget', metadata: { name: 'w', namespace: ns } } as SetMember,
        ]),
        inventory: [old],
      },
      { fieldManager: MANAGER, establishTimeoutMs: 1_000 },
    );
    expect(result.state).to.equal('waiting');
    expect(result.results[1]).to.deep.include({ outcome: 'waiting' });
    expect(result.results[1]?.message).to.include(`gadgets.${group}`);
    expect(result.pruned).to.deep.equal([]);
    expect(result.inventory).to.deep.include(old);
    expect(
      await readObject(skr.objects, { apiVersion: 'v1', kind: 'ConfigMap', name: 'old', namespace: ns }),
    ).to.not.equal(undefined);
  });

  it('prunes only after the new set applied: an observer never sees the operator absent when an upgrade renames it', async function () {
    const seen: string[] = [];
    let present = 0;
    let minimumAfterFirst = Number.POSITIVE_INFINITY;
    const names = new Set<string>();
    const watch = await new Watch(kc).watch(
      `/apis/apps/v1/namespaces/${ns}/deployments`,
      { labelSelector: 'role=operator' },
      (type: string, object: V1Deployment) => {
        const name = object.metadata?.name ?? '';
        seen.push(`${type} ${name}`);
        if (type === 'ADDED') names.add(name);
        if (type === 'DELETED') names.delete(name);
        present = names.size;
        if (seen.length > 1) minimumAfterFirst = Math.min(minimumAfterFirst, present);
      },
      () => undefined,
    );
    cleanups.push(async () => watch.abort());
    const v1 = [deployment(ns, 'operator-v1', { role: 'operator' }), configMap(ns, 'config')];
    const first = await applyObjectSet(
      skr,
      { objects: desired(v1), inventory: [] },
      { fieldManager: MANAGER },
    );
    expect(first.state).to.equal('done');
    const v2 = [deployment(ns, 'operator-v2', { role: 'operator' }), configMap(ns, 'config')];
    const second = await applyObjectSet(
      skr,
      { objects: desired(v2), inventory: first.inventory },
      { fieldManager: MANAGER },
    );
    expect(second.state).to.equal('done');
    expect(second.pruned.map((r) => [r.object.name, r.outcome])).to.deep.equal([['operator-v1', 'deleted']]);
    expect(second.inventory.map((entry) => entry.name).sort()).to.deep.equal(['config', 'operator-v2']);
    for (let attempt = 0; attempt < 200 && !seen.includes('DELETED operator-v1'); attempt++)
      await new Promise((resolve) => setTimeout(resolve, 50));
    expect(seen).to.deep.equal(['ADDED operator-v1', 'ADDED operator-v2', 'DELETED operator-v1']);
    expect(minimumAfterFirst, 'a moment without any operator Deployment').to.be.at.least(1);
    expect(present).to.equal(1);
  });

  it('prunes whenever the set changed, with the same source; a failure in the new set prunes nothing', async function () {
    const first = await applyObjectSet(
      skr,
      { objects: desired([configMap(ns, 'a'), configMap(ns, 'b')]), inventory: [] },
      { fieldManager: MANAGER },
    );
    // A new set that cannot be applied (a kind the SKR does not serve): b stays, and stays recorded.
    const broken = await applyObjectSet(
      skr,
      {
        objects: desired([
          configMap(ns, 'a'),
          {
            apiVersion: 'nothing.example.com/v1',
            kind: 'Nothing',
            metadata: { name: 'x', namespace: ns },
          } as SetMember,
        ]),
        inventory: first.inventory,
      },
      { fieldManager: MANAGER },
    );
    expect(broken.state).to.equal('failed');
    expect(broken.results[1]).to.deep.include({ outcome: 'failed' });
    expect(broken.results[1]?.message).to.match(/serves no Nothing in nothing.example.com\/v1/);
    expect(broken.inventory.map((entry) => entry.name).sort()).to.deep.equal(['a', 'b']);
    expect(
      await readObject(skr.objects, { apiVersion: 'v1', kind: 'ConfigMap', name: 'b', namespace: ns }),
    ).to.not.equal(undefined);
    // The same content without b: b is removed.
    const second = await applyObjectSet(
      skr,
      { objects: desired([configMap(ns, 'a')]), inventory: broken.inventory },
      { fieldManager: MANAGER },
    );
    expect(second.state).to.equal('done');
    expect(second.inventory.map((entry) => entry.name)).to.deep.equal(['a']);
    expect(
      await readObject(skr.objects, { apiVersion: 'v1', kind: 'ConfigMap', name: 'b', namespace: ns }),
    ).to.equal(undefined);
  });

  it('sets namespaces by discovery, keeps the kyma-system Namespace, and never touches what the guard refuses', async function () {
    const clusterRole = `objset-${process.pid}-${seq}`;
    cleanups.push(() =>
      skr.objects.delete({
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name: clusterRole },
      }),
    );
    const protectedMap = configMap(ns, 'protected', { mine: 'yes' });
    await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'protected' }, data: { mine: 'yes' } },
    });
    const refuse = (object: SyncedObject) =>
      object.name === 'protected' ? 'the agent runs this one' : undefined;
    const noNamespace: SetMember = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: `objset-default-${seq}` },
      data: {},
    };
    cleanups.push(() =>
      core.deleteNamespacedConfigMap({ namespace: 'default', name: `objset-default-${seq}` }),
    );
    const result = await applyObjectSet(
      skr,
      {
        objects: desired([
          noNamespace,
          {
            apiVersion: 'rbac.authorization.k8s.io/v1',
            kind: 'ClusterRole',
            metadata: { name: clusterRole, namespace: ns },
            rules: [],
          } as SetMember,
          { ...protectedMap, data: { mine: 'overwritten' } },
        ]),
        inventory: [
          syncedObjectOf({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'kyma-system' } }),
        ],
      },
      { fieldManager: MANAGER, refuse },
    );
    expect(result.results.map((r) => [r.object.kind, r.object.namespace, r.outcome])).to.deep.equal([
      ['ConfigMap', 'default', 'applied'],
      ['ClusterRole', '', 'applied'],
      ['ConfigMap', ns, 'refused'],
    ]);
    expect(result.results[2]?.message).to.equal('the agent runs this one');
    expect((await core.readNamespacedConfigMap({ namespace: ns, name: 'protected' })).data).to.deep.equal({
      mine: 'yes',
    });
    expect(result.pruned.map((r) => [r.object.name, r.outcome])).to.deep.equal([['kyma-system', 'kept']]);
    // Removal refuses it too.
    const removal = await removeObjects(skr, [syncedObjectOf(protectedMap)], { refuse });
    expect(removal.results[0]?.outcome).to.equal('refused');
    expect(
      await readObject(skr.objects, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        name: 'protected',
        namespace: ns,
      }),
    ).to.not.equal(undefined);
  });

  it('removes a set in two phases: the operator Deployment stays until every other object is gone', async function () {
    const blocked: SetMember = {
      ...configMap(ns, 'held'),
      metadata: { name: 'held', namespace: ns, finalizers: ['example.com/held'] },
    };
    const applied = await applyObjectSet(
      skr,
      { objects: desired([deployment(ns, 'operator'), blocked, configMap(ns, 'plain')]), inventory: [] },
      { fieldManager: MANAGER },
    );
    expect(applied.state).to.equal('done');
    const first = await removeObjects(skr, applied.inventory);
    expect(first.finished).to.equal(false);
    expect(first.results.map((r) => [r.object.name, r.outcome])).to.deep.equal([
      ['operator', 'waiting'],
      ['held', 'deleting'],
      ['plain', 'deleted'],
    ]);
    expect(first.remaining.map((entry) => entry.name)).to.deep.equal(['operator', 'held']);
    expect(await apps.readNamespacedDeployment({ namespace: ns, name: 'operator' })).to.have.nested.property(
      'metadata.name',
      'operator',
    );
    await core.patchNamespacedConfigMap(
      { namespace: ns, name: 'held', body: { metadata: { finalizers: null } } },
      mergePatch,
    );
    const second = await removeObjects(skr, first.remaining);
    expect(second.finished).to.equal(true);
    expect(second.remaining).to.deep.equal([]);
    expect(
      await readObject(skr.objects, {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        name: 'operator',
        namespace: ns,
      }),
    ).to.equal(undefined);
  });

  it('removes a set with its CRD in one call: the CRD, whose deletion the API server finishes, is waited for', async function () {
    const group = `objsetr${process.pid}x${seq}.example.com`;
    const holder = { namespace: 'kcp-system', name: `removal-${seq}` };
    cleanups.push(() => skr.apiextensions.deleteCustomResourceDefinition({ name: `widgets.${group}` }));
    const widget: SetMember = {
      apiVersion: `${group}/v1`,
      kind: 'Widget',
      metadata: { name: 'w', namespace: ns },
      spec: { size: 1 },
    };
    const applied = await applyObjectSet(
      skr,
      { objects: desired([crd(group), configMap(ns, 'config'), widget]), inventory: [] },
      {
        fieldManager: MANAGER,
        transforms: [managedByOwnedBy(holder)],
        holding: { self: manifestHolder(holder.namespace, holder.name) },
      },
    );
    expect(applied.state).to.equal('done');
    const removal = await removeObjects(skr, applied.inventory, {
      holding: { self: manifestHolder(holder.namespace, holder.name) },
    });
    expect(
      removal.results.map((r) => [r.object.kind, r.outcome]),
      JSON.stringify(removal.results),
    ).to.deep.equal([
      ['CustomResourceDefinition', 'deleted'],
      ['ConfigMap', 'deleted'],
      ['Widget', 'deleted'],
    ]);
    expect(removal.finished).to.equal(true);
    expect(removal.remaining).to.deep.equal([]);
    expect(
      await readObject(skr.objects, {
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        name: `widgets.${group}`,
      }),
    ).to.equal(undefined);
  });

  describe('one holder per object', function () {
    /** A module's set: its transforms name it the holder, as the Manifest reconcile's do. */
    const moduleSet = (name: string) => ({
      fieldManager: MANAGER,
      transforms: [managedByOwnedBy({ namespace: 'kcp-system', name })],
      holding: { self: manifestHolder('kcp-system', name) },
    });
    const widgetCrd = (group: string) => ({
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      name: `widgets.${group}`,
    });

    it("refuses a second set the first set's CRD, and removing the second leaves the CRD and a user's CR of it", async function () {
      const group = `held${seq}.example.com`;
      cleanups.push(() =>
        skr.objects.delete({ ...widgetCrd(group), metadata: { name: `widgets.${group}` } }),
      );
      const a = await applyObjectSet(skr, { objects: desired([crd(group)]), inventory: [] }, moduleSet('a'));
      expect(a.results.map((r) => r.outcome)).to.deep.equal(['applied']);
      const userCr = {
        apiVersion: `${group}/v1`,
        kind: 'Widget',
        metadata: { name: 'users', namespace: ns },
        spec: { size: 3 },
      };
      const created: KubernetesObject = await skr.objects.create(userCr);

      const b = await applyObjectSet(
        skr,
        { objects: desired([crd(group), configMap(ns, 'b-config')]), inventory: [] },
        moduleSet('b'),
      );
      expect(b.results.map((r) => [r.object.name, r.outcome])).to.deep.equal([
        [`widgets.${group}`, 'refused'],
        ['b-config', 'applied'],
      ]);
      expect(b.results[0]?.message).to.include('is held by Manifest kcp-system/a');
      expect(b.inventory.map((entry) => entry.name)).to.deep.equal(['b-config']);
      const live = await readObject(skr.objects, widgetCrd(group));
      expect(live?.metadata?.annotations).to.have.property(
        'deprecated-operator.kyma-project.io/owned-by',
        'kcp-system/a',
      );

      // Even given the CRD (an inventory written before holders were checked), B's removal leaves it.
      const removal = await removeObjects(skr, [...b.inventory, syncedObjectOf(crd(group))], {
        holding: moduleSet('b').holding,
      });
      expect(removal.finished).to.equal(true);
      expect(removal.results.map((r) => [r.object.name, r.outcome])).to.deep.equal([
        ['b-config', 'deleted'],
        [`widgets.${group}`, 'kept'],
      ]);
      expect((await readObject(skr.objects, widgetCrd(group)))?.metadata?.uid).to.equal(live?.metadata?.uid);
      const still = await readObject(skr.objects, {
        apiVersion: `${group}/v1`,
        kind: 'Widget',
        name: 'users',
        namespace: ns,
      });
      expect(still?.metadata?.uid).to.equal(created.metadata?.uid);
    });

    it('adopts an object the user made before, says so, and lets it go with its data on removal', async function () {
      await core.createNamespacedConfigMap({
        namespace: ns,
        body: {
          metadata: { name: 'theirs', namespace: ns, labels: { team: 'users' } },
          data: { mine: 'keep' },
        },
      });
      const applied = await applyObjectSet(
        skr,
        { objects: desired([configMap(ns, 'theirs', { module: 'value' })]), inventory: [] },
        moduleSet('a'),
      );
      expect(applied.results.map((r) => r.outcome)).to.deep.equal(['adopted']);
      expect(applied.results[0]?.message).to.include('existed before the install');
      const again = await applyObjectSet(
        skr,
        { objects: desired([configMap(ns, 'theirs', { module: 'value' })]), inventory: applied.inventory },
        moduleSet('a'),
      );
      expect(again.results.map((r) => r.outcome)).to.deep.equal(['adopted']);

      const removal = await removeObjects(skr, again.inventory, { holding: moduleSet('a').holding });
      expect(removal.results.map((r) => r.outcome)).to.deep.equal(['kept']);
      const left = await core.readNamespacedConfigMap({ namespace: ns, name: 'theirs' });
      expect(left.data).to.include({ mine: 'keep', module: 'value' });
      expect(left.metadata?.labels).to.deep.equal({ team: 'users' });
      expect(left.metadata?.annotations ?? {}).to.not.have.any.keys(
        'deprecated-operator.kyma-project.io/owned-by',
        'operator.kyma-project.io/adopted',
      );
    });

    it('deletes what the set made itself, and not an object made again under its name by someone else', async function () {
      const applied = await applyObjectSet(
        skr,
        { objects: desired([configMap(ns, 'made')]), inventory: [] },
        moduleSet('a'),
      );
      expect(applied.results.map((r) => r.outcome)).to.deep.equal(['applied']);
      await core.deleteNamespacedConfigMap({ namespace: ns, name: 'made' });
      await core.createNamespacedConfigMap({
        namespace: ns,
        body: { metadata: { name: 'made' }, data: { user: 'x' } },
      });
      const removal = await removeObjects(skr, applied.inventory, { holding: moduleSet('a').holding });
      expect(removal.results.map((r) => r.outcome)).to.deep.equal(['kept']);
      expect((await core.readNamespacedConfigMap({ namespace: ns, name: 'made' })).data).to.deep.equal({
        user: 'x',
      });

      const own = await applyObjectSet(
        skr,
        { objects: desired([configMap(ns, 'own')]), inventory: [] },
        moduleSet('a'),
      );
      const gone = await removeObjects(skr, own.inventory, { holding: moduleSet('a').holding });
      expect(gone.results.map((r) => r.outcome)).to.deep.equal(['deleted']);
    });
  });

  it('a set is Ready only when every workload is available: the second Deployment unavailable keeps it Processing', async function () {
    const applied = await applyObjectSet(
      skr,
      {
        objects: desired([deployment(ns, 'first'), configMap(ns, 'c'), deployment(ns, 'second')]),
        inventory: [],
      },
      { fieldManager: MANAGER },
    );
    // No controller runs here: write the status a Deployment controller would.
    const writeStatus = async (name: string, available: number) => {
      const current = await apps.readNamespacedDeployment({ namespace: ns, name });
      await apps.patchNamespacedDeploymentStatus(
        {
          namespace: ns,
          name,
          body: {
            status: {
              observedGeneration: current.metadata?.generation,
              replicas: 1,
              updatedReplicas: 1,
              readyReplicas: available,
              availableReplicas: available,
              conditions: [
                {
                  type: 'Available',
                  status: available ? 'True' : 'False',
                  reason: available ? 'MinimumReplicasAvailable' : 'MinimumReplicasUnavailable',
                },
                { type: 'Progressing', status: 'True', reason: 'NewReplicaSetAvailable' },
              ],
            },
          },
        },
        mergePatch,
      );
    };
    const before = await readinessOfSet(skr, applied.inventory);
    expect(before.state).to.equal('Processing');
    expect(before.message).to.match(/not yet observed/);

    await writeStatus('first', 1);
    await writeStatus('second', 0);
    const partly = await readinessOfSet(skr, applied.inventory);
    expect(partly.state).to.equal('Processing');
    expect(partly.workloads.map((w) => [w.object.name, w.state])).to.deep.equal([
      ['first', 'Ready'],
      ['second', 'Processing'],
    ]);
    expect(partly.message).to.equal(`Deployment.apps ${ns}/second: 0 of 1 updated replicas available`);

    await writeStatus('second', 1);
    const ready = await readinessOfSet(skr, applied.inventory);
    expect(ready.state).to.equal('Ready');
    expect(ready.message).to.equal(undefined);
    // A set without workloads is Ready.
    expect((await readinessOfSet(skr, [syncedObjectOf(configMap(ns, 'c'))])).state).to.equal('Ready');
  });
});
