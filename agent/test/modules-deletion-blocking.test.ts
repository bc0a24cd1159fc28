// A disabled module's removal waits for every CR of its kind, as upstream lifecycle-manager's
// module-deletion-blocking-* e2e scenarios expect, on a real KCP, a real SKR and a real registry: while a CR blocks,
// the Manifest is Deleting, the Kyma Processing and every object of the module stays in the SKR; once the last CR
// is gone the default CR (CreateAndDelete only), the module's objects and the Manifest go and the Kyma is Ready.
// Variants: several users' CRs (one deleted first: still blocked), CRs in several namespaces, a cluster-scoped CRD,
// the Ignore policy (no default CR; a CR of the default's name blocks like any other), a user's finalizer on the
// default CR, and the default CR alone (nothing blocks).
import { expect } from 'chai';
import { CoreV1Api } from '@kubernetes/client-node';
import { moduleSuite, type Json } from './support/modules.js';
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
    await suite.reconcileUntil(
      'k1',
      async () => (await manifest())?.status?.state === 'Deleting' && (await kymaState()) === 'Processing',
      'Manifest Deleting, Kyma Processing',
    );
    if (users.length > 0 || holdDefault) {
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

    await suite.reconcileUntil(
      'k1',
      async () => (await suite.manifests()).length === 0 && (await kymaState()) === 'Ready',
      'module removed, Kyma Ready',
    );
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
});
