// Upstream lifecycle-manager's misconfigured-kyma-secret e2e scenario, with an SKR kubeconfig whose identity may only
// view (the API server's built-in `view` ClusterRole), on a real KCP, a real SKR and a real registry: with it from the
// start nothing reaches the SKR and no Manifest is made, and the Kyma is Error; with it in place of a working one the
// Kyma, its module entries and the module's Manifest go Error with the API server's refusal; a working kubeconfig in
// the same Secret heals both.
import { readFile } from 'node:fs/promises';
import { expect } from 'chai';
import { moduleSuite, type Json } from './support/modules.js';
import {
  defaultCrAddress,
  moduleCrs,
  publishModuleWithCrs,
  readOperator,
  uniqueModule,
} from './support/module-crs.js';
import { replaceKubeconfig, viewOnlyKubeconfig } from './support/skr-identities.js';

describe('an SKR kubeconfig whose identity may only view, as upstream lifecycle-manager', function () {
  this.timeout(300_000);
  const suite = moduleSuite();
  const { planes } = suite;
  const secret = 'kubeconfig-k1';
  const useKubeconfig = (kubeconfig: string) =>
    replaceKubeconfig(planes.kcp, suite.state.ns, secret, kubeconfig);
  const working = () => readFile(planes.env.plane('skr1').kubeconfigPath, 'utf8');
  const viewOnly = () => viewOnlyKubeconfig(planes.skr, `viewer-${process.pid}`);
  const manifest = async () => (await suite.manifests())[0] as Json | undefined;
  const kymaStatus = async () => ((await suite.kcpKyma('k1')).status ?? {}) as Json;
  const skrConnected = async () =>
    ((await kymaStatus()).conditions ?? []).find((c: Json) => c.type === 'SKRConnected') as Json | undefined;
  const refusal = /HTTP 403: .*is forbidden: User "system:serviceaccount:default:viewer-\d+" cannot/;
  /** Reconciles until `done`; a pass that fails on the SKR's refusal is expected here. */
  const reconcileUntil = (done: () => Promise<boolean>, what: string) =>
    suite.reconcileUntil('k1', done, what);
  const healed = async (module: string) =>
    (await manifest())?.status?.state === 'Ready' &&
    (await suite.moduleStatus('k1', module))?.state === 'Ready' &&
    (await kymaStatus()).state === 'Ready';

  it('misconfigured-kyma-secret: a view-only identity from the start: no Manifest, no module CR, the Kyma Error; a working Secret installs the module, its Manifest Ready', async function () {
    const module = uniqueModule(suite, 'viewer');
    await publishModuleWithCrs(suite, module);
    await suite.kyma('k1', [{ name: module }]);
    await useKubeconfig(await viewOnly());
    await suite.start();
    await reconcileUntil(async () => refusal.test((await skrConnected())?.message ?? ''), 'the SKR refuses');
    expect((await kymaStatus()).state).to.equal('Error');
    expect(await skrConnected()).to.include({ status: 'False' });
    expect(await suite.manifests(), 'no Manifest').to.deep.equal([]);
    expect(await moduleCrs(suite, module).read(defaultCrAddress(module, 'Namespaced'))).to.equal(undefined);

    await useKubeconfig(await working());
    await reconcileUntil(() => healed(module), 'module, Manifest and Kyma Ready');
    expect(await moduleCrs(suite, module).read(defaultCrAddress(module, 'Namespaced'))).to.not.equal(
      undefined,
    );
    expect(await skrConnected()).to.include({ status: 'True' });
  });

  it('a working Secret replaced by a view-only one: the Kyma, its module and the Manifest go Error with the refusal; the working one back, all Ready', async function () {
    const module = uniqueModule(suite, 'demoted');
    await publishModuleWithCrs(suite, module);
    await suite.kyma('k1', [{ name: module }]);
    await suite.start();
    await reconcileUntil(() => healed(module), 'module, Manifest and Kyma Ready');

    await useKubeconfig(await viewOnly());
    await reconcileUntil(
      async () => (await manifest())?.status?.state === 'Error',
      'the Manifest Error with the refusal',
    );
    const refused = (await manifest())!;
    expect(refused.status.lastOperation.operation).to.match(refusal);
    expect((await kymaStatus()).state).to.equal('Error');
    expect(await skrConnected()).to.include({ status: 'False' });
    expect((await skrConnected())?.message).to.match(refusal);
    const entry = await suite.moduleStatus('k1', module);
    expect(entry?.state).to.equal('Error');
    expect(entry?.message).to.match(refusal);
    expect(await readOperator(suite, module), 'nothing in the SKR was touched').to.not.equal(undefined);

    await useKubeconfig(await working());
    await reconcileUntil(() => healed(module), 'module, Manifest and Kyma Ready again');
    expect((await manifest())?.metadata.uid, 'the same Manifest').to.equal(refused.metadata.uid);
    expect(await skrConnected()).to.include({ status: 'True' });
  });
});
