// Upstream lifecycle-manager's skip-manifest-reconciliation e2e scenario on a real KCP, a real SKR and a real
// registry: a Manifest labelled operator.kyma-project.io/skip-reconciliation=true is left alone (its operator and
// default CR, deleted in the SKR, stay deleted), and once the label goes its operator is put back and the Kyma is
// Ready again; a deleted Manifest that another finalizer holds after the module is removed says so
// ("waiting as other finalizers are present") without rewriting its status on every pass.
import { expect } from 'chai';
import { CoreV1Api } from '@kubernetes/client-node';
import { LABELS } from '@skr-watcher/api';
import { mergePatch, moduleSuite, type Json } from './support/modules.js';
import {
  defaultCrAddress,
  moduleCrs,
  operatorOf,
  publishModuleWithCrs,
  readOperator,
  uniqueModule,
} from './support/module-crs.js';
import { refTo } from './support/planes.js';

describe('Manifest skip-reconciliation label as upstream lifecycle-manager', function () {
  this.timeout(300_000);
  const suite = moduleSuite();
  const { planes } = suite;
  const skrCore = () => planes.skr.makeApiClient(CoreV1Api);
  const manifest = async () => (await suite.manifests())[0] as Json | undefined;
  const patchManifest = async (body: Json) => {
    const name = (await manifest())!.metadata.name as string;
    await suite
      .api()
      .patchNamespacedCustomObject({ ...refTo('manifest', suite.state.ns, name), body }, mergePatch);
  };
  const kymaState = async () => (await suite.kcpKyma('k1')).status?.state as string | undefined;
  const passes = async (count: number) => {
    for (let pass = 0; pass < count; pass++) {
      await suite.state.manager!.reconciler.reconcile(`${suite.state.ns}/k1`);
      // Status timestamps have a resolution of one second: passes a second apart would show a rewrite.
      await new Promise((resolve) => setTimeout(resolve, 1_100));
    }
  };

  /** A module with an operator and a default CR, Ready, and the Kyma Ready. */
  async function installed(base: string) {
    const module = uniqueModule(suite, base);
    await publishModuleWithCrs(suite, module);
    await suite.kyma('k1', [{ name: module }]);
    await suite.start();
    await suite.reconcileUntil(
      'k1',
      async () =>
        (await suite.moduleStatus('k1', module))?.state === 'Ready' && (await kymaState()) === 'Ready',
      'module and Kyma Ready',
    );
    return module;
  }

  it('skip-manifest-reconciliation: the labelled Manifest’s deleted operator and default CR stay deleted; without the label the operator is back and the Kyma Ready', async function () {
    const module = await installed('skip');
    const crs = moduleCrs(suite, module);
    const defaultCr = defaultCrAddress(module, 'Namespaced');
    expect(await crs.read(defaultCr)).to.not.equal(undefined);
    expect(await readOperator(suite, module)).to.not.equal(undefined);

    await patchManifest({ metadata: { labels: { [LABELS.skipReconciliation]: 'true' } } });
    await crs.remove(defaultCr);
    await skrCore().deleteNamespacedConfigMap({ name: operatorOf(module), namespace: 'kyma-system' });
    await passes(3);
    expect(await crs.read(defaultCr), 'the default CR is not recreated while labelled').to.equal(undefined);
    expect(await readOperator(suite, module), 'the operator is not recreated while labelled').to.equal(
      undefined,
    );
    expect((await manifest())?.metadata.labels?.[LABELS.skipReconciliation], 'the label stays').to.equal(
      'true',
    );

    await patchManifest({ metadata: { labels: { [LABELS.skipReconciliation]: null } } });
    await suite.reconcileUntil(
      'k1',
      async () =>
        (await readOperator(suite, module)) !== undefined &&
        (await suite.moduleStatus('k1', module))?.state === 'Ready' &&
        (await kymaState()) === 'Ready',
      'the operator recreated, module and Kyma Ready',
    );
    expect((await manifest())?.status?.state).to.equal('Ready');
  });

  it('skip-manifest-reconciliation: a deleted Manifest another finalizer holds is Deleting, “waiting as other finalizers are present”, its lastUpdateTime unchanged by later passes', async function () {
    const module = await installed('held');
    const held = (await manifest())!;
    await patchManifest({
      metadata: {
        finalizers: [...(held.metadata.finalizers as string[]), 'blocking-finalizer'],
        resourceVersion: held.metadata.resourceVersion,
      },
    });
    await suite.api().deleteNamespacedCustomObject(refTo('manifest', suite.state.ns, held.metadata.name));
    await suite.reconcileUntil(
      'k1',
      async () => {
        const now = await manifest();
        return (
          now?.metadata.uid === held.metadata.uid &&
          now?.status?.state === 'Deleting' &&
          /waiting as other finalizers are present/.test(now?.status?.lastOperation?.operation ?? '')
        );
      },
      'Manifest Deleting, waiting for the other finalizer',
    );
    const waiting = (await manifest())!;
    expect(waiting.metadata.finalizers).to.deep.equal(['blocking-finalizer']);
    expect(await readOperator(suite, module), 'the module was removed from the SKR').to.equal(undefined);

    await passes(3);
    const later = (await manifest())!;
    expect(later.status.lastOperation).to.deep.equal(waiting.status.lastOperation);
    expect(later.metadata.resourceVersion, 'no write at all').to.equal(waiting.metadata.resourceVersion);

    await patchManifest({ metadata: { finalizers: [] } });
  });
});
