// A disabled module's removal waits for every CR of its kind, as upstream lifecycle-manager's
// module-deletion-blocking-* e2e scenarios expect, on a real KCP, a real SKR and a real registry: while a CR blocks,
// the Manifest is Deleting, the Kyma Processing and every object of the module stays in the SKR; once the last CR
// is gone the default CR (CreateAndDelete only), the module's objects and the Manifest go in one pass and the Kyma is
// Ready.
// Variants: several users' CRs (one deleted first: still blocked), CRs in several namespaces, a cluster-scoped CRD,
// the Ignore policy (no default CR; a CR of the default's name blocks like any other), a user's finalizer on the
// default CR, and the default CR alone (nothing blocks); and non-blocking-deletion's last part: a CR the module
// itself installed, held by a finalizer, keeps the module's operator and RBAC in place until it is gone.
import { expect } from 'chai';
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import {
  configMapYaml,
  crdYaml,
  docs,
  mergePatch,
  moduleKind,
  moduleSuite,
  type Json,
} from './support/modules.js';
import {
  defaultCrAddress,
  moduleCrs,
  publishModuleWithCrs,
  uniqueModule,
  type CrAddress,
  type CrdScope,
} from './support/module-crs.js';
import { custom, getOrUndefined } from './support/planes.js';

type Policy = 'CreateAndDelete' | 'Ignore';

interface BlockingCase {
  policy: Policy;
  scope?: CrdScope;
  /** Users' CRs created before the module is disabled, deleted in this order once it is Deleting. */
  users?: CrAddress[];
  /** A user's finalizer on the default CR instead of users' CRs. */
  holdDefault?: boolean;
}

describe('module deletion blocked by Module CRs as upstream lifecycle-manager', function () {
  this.timeout(300_000);
  const suite = moduleSuite();
  const { planes } = suite;

  /** Whether the SKR object a Manifest's inventory names (a ConfigMap or a CRD here) exists. */
  const exists = async (synced: Json) =>
    (await getOrUndefined(() =>
      synced.kind === 'ConfigMap'
        ? planes.skr
            .makeApiClient(CoreV1Api)
            .readNamespacedConfigMap({ name: synced.name, namespace: synced.namespace })
        : custom(planes.skr).getClusterCustomObject({
            group: synced.group,
            version: synced.version,
            plural: 'customresourcedefinitions',
            name: synced.name,
          }),
    )) !== undefined;
  const manifest = async () => (await suite.manifests())[0];
  const kymaState = async () => (await suite.kcpKyma('k1')).status?.state as string | undefined;
  /** A few passes that must change nothing while a CR blocks (upstream checks this for three seconds). */
  const passes = async (count: number) => {
    for (let pass = 0; pass < count; pass++)
      await suite.state.manager!.reconciler.reconcile(`${suite.state.ns}/k1`);
  };

  async function expectBlocked(module: string, inventory: Json[], defaultCr: CrAddress, policy: Policy) {
    const now = await manifest();
    expect(now?.status?.state, now?.status?.lastOperation?.operation).to.equal('Deleting');
    expect(now?.status?.lastOperation?.operation).to.match(/waiting for module CRs deletion|default CR/);
    expect(await kymaState()).to.equal('Processing');
    expect((await suite.moduleStatus('k1', module))?.state).to.equal('Deleting');
    for (const synced of inventory)
      expect(await exists(synced), `${synced.kind} ${synced.name} stays while blocked`).to.equal(true);
    if (policy === 'CreateAndDelete')
      expect(await moduleCrs(suite, module).read(defaultCr), 'the default CR stays').to.not.equal(undefined);
  }

  async function scenario(
    base: string,
    { policy, scope = 'Namespaced', users = [], holdDefault }: BlockingCase,
  ) {
    const module = uniqueModule(suite, base);
    const crs = moduleCrs(suite, module);
    const defaultCr = defaultCrAddress(module, scope);
    await publishModuleWithCrs(suite, module, scope);
    await suite.kyma('k1', [{ name: module, customResourcePolicy: policy }]);
    await suite.start();
    await suite.reconcileUntil(
      'k1',
      async () =>
        (await suite.moduleStatus('k1', module))?.state === 'Ready' && (await kymaState()) === 'Ready',
      'module and Kyma Ready',
    );
    const installed = (await crs.read(defaultCr)) !== undefined;
    expect(installed, `the default CR is created under ${policy} only when CreateAndDelete`).to.equal(
      policy === 'CreateAndDelete',
    );
    const inventory = ((await manifest())?.status?.synced ?? []) as Json[];
    expect(inventory.map((s) => s.kind).sort()).to.deep.equal(['ConfigMap', 'CustomResourceDefinition']);

    for (const user of users) await crs.create(user);
    if (holdDefault) await crs.hold(defaultCr, ['test-finalizer']);
    await suite.skrModules([]);
    if (users.length > 0 || holdDefault) {
      await suite.reconcileUntil(
        'k1',
        async () => (await manifest())?.status?.state === 'Deleting' && (await kymaState()) === 'Processing',
        'Manifest Deleting, Kyma Processing',
      );
      await passes(3);
      await expectBlocked(module, inventory, defaultCr, policy);
      if (holdDefault)
        expect((await crs.read(defaultCr))?.metadata.deletionTimestamp, 'deleted, held by the user').to.be.a(
          'string',
        );
    }
    if (users.length > 1) {
      await crs.remove(users[0]!);
      await passes(3);
      await expectBlocked(module, inventory, defaultCr, policy);
      expect((await manifest())?.status?.lastOperation?.operation).to.include(users[1]!.name);
    }
    for (const user of users.slice(users.length > 1 ? 1 : 0)) await crs.remove(user);
    if (holdDefault) await crs.hold(defaultCr, []);

    // Nothing but the API server holds what is left to delete (the default CR, the CRD): one pass takes it all.
    await passes(1);
    const left = await manifest();
    expect(left, `the Manifest is gone after one pass: ${left?.status?.lastOperation?.operation}`).to.equal(
      undefined,
    );
    expect(await kymaState()).to.equal('Ready');
    expect(await crs.read(defaultCr), 'the default CR is gone').to.equal(undefined);
    for (const synced of inventory)
      expect(await exists(synced), `${synced.kind} ${synced.name} deleted`).to.equal(false);
    expect(await suite.moduleStatus('k1', module)).to.equal(undefined);
  }

  it('module-deletion-blocking-with-multiple-crs-ignore-policy: two CRs in kyma-system block; one deleted, still blocked; both gone, the module goes', async function () {
    await scenario('mignore', {
      policy: 'Ignore',
      users: [
        { name: 'sample-cr-1', namespace: 'kyma-system' },
        { name: 'sample-cr-2', namespace: 'kyma-system' },
      ],
    });
  });

  it('module-deletion-blocking-with-multiple-crs-create-and-delete-policy: the default CR stays while two users’ CRs block; then everything goes', async function () {
    await scenario('mcreate', {
      policy: 'CreateAndDelete',
      users: [
        { name: 'sample-cr-1', namespace: 'kyma-system' },
        { name: 'sample-cr-2', namespace: 'kyma-system' },
      ],
    });
  });

  it('module-deletion-blocking-with-cross-namespace-ignore-policy: CRs in kyma-system and default block', async function () {
    await scenario('xignore', {
      policy: 'Ignore',
      users: [
        { name: 'sample-cr-in-kyma-system', namespace: 'kyma-system' },
        { name: 'sample-cr-in-default-ns', namespace: 'default' },
      ],
    });
  });

  it('module-deletion-blocking-with-cross-namespace-create-and-delete-policy: a CR in default blocks', async function () {
    await scenario('xcreate', {
      policy: 'CreateAndDelete',
      users: [{ name: 'sample-cr-in-default-ns', namespace: 'default' }],
    });
  });

  it('module-deletion-blocking-with-cluster-scoped-crs-ignore-policy: cluster-scoped CRs block', async function () {
    await scenario('cignore', {
      policy: 'Ignore',
      scope: 'Cluster',
      users: [{ name: 'sample-cr-1' }, { name: 'sample-cr-2' }],
    });
  });

  it('module-deletion-blocking-with-cluster-scoped-crs-create-and-delete-policy: the cluster-scoped default CR does not block; users’ cluster-scoped CRs do', async function () {
    await scenario('ccreate', {
      policy: 'CreateAndDelete',
      scope: 'Cluster',
      users: [{ name: 'sample-cr-1' }, { name: 'sample-cr-2' }],
    });
  });

  it('module-deletion-blocking-with-default-cr-with-finalizer: a finalizer on the default CR holds the module in Deleting until it is removed', async function () {
    await scenario('held', { policy: 'CreateAndDelete', holdDefault: true });
  });

  it('module-deletion-with-only-default-cr: nothing but the default CR, the removal goes through', async function () {
    await scenario('alone', { policy: 'CreateAndDelete' });
  });

  it('non-blocking-deletion (managed CR blocked): a CR the module installed, held by a finalizer, keeps the operator Deployment and its ServiceAccount until it goes', async function () {
    const module = uniqueModule(suite, 'managed');
    const { group, kind } = moduleKind(module);
    const managed = { name: `${module}-managed`, namespace: 'kyma-system' };
    const operator = `${module}-operator`;
    await suite.publish({
      moduleName: module,
      version: '1.0.0',
      rawManifest: docs(
        crdYaml(group, kind),
        crdYaml(group, 'Managed'),
        `apiVersion: ${group}/v1\nkind: Managed\nmetadata:\n  name: ${managed.name}\n  namespace: kyma-system\nspec: {}\n`,
        `apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: ${operator}\n  namespace: kyma-system\n`,
        `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${operator}
  namespace: kyma-system
spec:
  replicas: 0
  selector: {matchLabels: {app: ${operator}}}
  template:
    metadata: {labels: {app: ${operator}}}
    spec:
      serviceAccountName: ${operator}
      containers: [{name: manager, image: registry.invalid/operator:1}]
`,
        configMapYaml(`${module}-config`, 'kyma-system'),
      ),
      defaultCr: `apiVersion: ${group}/v1\nkind: ${kind}\nmetadata:\n  name: ${module}-default\n  namespace: kyma-system\nspec: {}\n`,
    });
    const apps = planes.skr.makeApiClient(AppsV1Api);
    const core = planes.skr.makeApiClient(CoreV1Api);
    const deployment = () =>
      getOrUndefined(() => apps.readNamespacedDeployment({ name: operator, namespace: 'kyma-system' }));
    const serviceAccount = () =>
      getOrUndefined(() => core.readNamespacedServiceAccount({ name: operator, namespace: 'kyma-system' }));
    const managedCr = () =>
      getOrUndefined(() =>
        custom(planes.skr).getNamespacedCustomObject({
          group,
          version: 'v1',
          plural: 'manageds',
          ...managed,
        }),
      ) as Promise<Json | undefined>;
    const holdManaged = (finalizers: string[]) =>
      custom(planes.skr).patchNamespacedCustomObject(
        { group, version: 'v1', plural: 'manageds', ...managed, body: { metadata: { finalizers } } },
        mergePatch,
      );

    await suite.kyma('k1', [{ name: module }]);
    await suite.start();
    await suite.reconcileUntil('k1', async () => (await deployment()) !== undefined, 'operator applied');
    // No controller runs in this SKR: the test reports the scaled-to-zero Deployment's rollout as its controller would.
    const generation = (await deployment())!.metadata!.generation!;
    await apps.patchNamespacedDeploymentStatus(
      {
        name: operator,
        namespace: 'kyma-system',
        body: {
          status: { observedGeneration: generation, replicas: 0, updatedReplicas: 0, availableReplicas: 0 },
        },
      },
      mergePatch,
    );
    await suite.reconcileUntil(
      'k1',
      async () =>
        (await suite.moduleStatus('k1', module))?.state === 'Ready' && (await kymaState()) === 'Ready',
      'module and Kyma Ready',
    );

    await holdManaged(['sample.kyma-project.io/finalizer', 'blocking-finalizer']);
    await suite.skrModules([]);
    await suite.reconcileUntil(
      'k1',
      async () =>
        (await manifest())?.status?.state === 'Deleting' &&
        (await managedCr())?.metadata.deletionTimestamp !== undefined,
      'Manifest Deleting, the managed CR deleted but held',
    );
    await passes(3);
    expect((await manifest())?.status?.state).to.equal('Deleting');
    expect(await kymaState()).to.equal('Processing');
    expect(await deployment(), 'the operator stays while its CR is held').to.not.equal(undefined);
    expect(await serviceAccount(), 'its RBAC stays while its CR is held').to.not.equal(undefined);
    expect((await manifest())?.status?.lastOperation?.operation).to.include(managed.name);

    await holdManaged([]);
    await suite.reconcileUntil(
      'k1',
      async () => (await suite.manifests()).length === 0 && (await kymaState()) === 'Ready',
      'module removed, Kyma Ready',
    );
    expect(await managedCr()).to.equal(undefined);
    expect(await deployment()).to.equal(undefined);
    expect(await serviceAccount()).to.equal(undefined);
    expect(await moduleCrs(suite, module).read(defaultCrAddress(module, 'Namespaced'))).to.equal(undefined);
  });
});
