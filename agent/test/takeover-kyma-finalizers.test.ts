// The KCP Kyma's finalizers in a takeover from lifecycle-manager (decision 028), on a real KCP and SKR: a Kyma that
// still carries lifecycle-manager's finalizers when it is deleted after the switch would otherwise wait for them
// forever, since nothing runs that removes them.
import { expect } from 'chai';
import { KYMA_FINALIZER, LIFECYCLE_MANAGER } from '@skr-watcher/api';
import { createClusterClient, type ClusterClient } from '@skr-watcher/kube';
import { swapKymaFinalizers } from '../src/takeover/index.js';
import { refTo } from './support/planes.js';
import { mergePatch, moduleSuite } from './support/modules.js';

describe("skr-agent takeover: the KCP Kyma's finalizers", function () {
  this.timeout(300_000);
  const suite = moduleSuite();
  let kcp: ClusterClient;
  beforeEach(async function () {
    kcp = await createClusterClient(suite.planes.kcp);
  });
  afterEach(async function () {
    await kcp.close();
  });

  const finalizersOf = async (name: string) =>
    ((await suite.kcpKyma(name)).metadata?.finalizers ?? []) as string[];
  const setFinalizers = (name: string, finalizers: readonly string[]) =>
    suite
      .api()
      .patchNamespacedCustomObject(
        { ...refTo('kyma', suite.state.ns, name), body: { metadata: { finalizers: [...finalizers] } } },
        mergePatch,
      );

  it("swaps lifecycle-manager's for the agent's in one write; a Kyma deleted afterwards is removed by the agent", async function () {
    await suite.kyma('k1', []);
    await setFinalizers('k1', LIFECYCLE_MANAGER.kymaFinalizers);

    expect(await swapKymaFinalizers(kcp, suite.state.ns, 'k1', { dryRun: true })).to.equal('swapped');
    expect(await finalizersOf('k1'), 'a dry run writes nothing').to.deep.equal([
      ...LIFECYCLE_MANAGER.kymaFinalizers,
    ]);
    expect(await swapKymaFinalizers(kcp, suite.state.ns, 'k1')).to.equal('swapped');
    expect(await finalizersOf('k1')).to.deep.equal([KYMA_FINALIZER]);
    expect(await swapKymaFinalizers(kcp, suite.state.ns, 'k1'), 'run again').to.equal('unchanged');

    await suite.start();
    await suite.deleteKyma('k1');
  });

  it("hands the agent's back as lifecycle-manager's reconciler finalizer; a Kyma being deleted keeps its own", async function () {
    await suite.kyma('k2', []);
    await setFinalizers('k2', ['example.com/other', KYMA_FINALIZER]);
    expect(await swapKymaFinalizers(kcp, suite.state.ns, 'k2', { handBack: true })).to.equal('swapped');
    expect(await finalizersOf('k2')).to.deep.equal([
      'example.com/other',
      LIFECYCLE_MANAGER.kymaFinalizers[0],
    ]);

    // Being deleted: no finalizer may be added, and dropping lifecycle-manager's would skip every cleanup.
    await suite.api().deleteNamespacedCustomObject(refTo('kyma', suite.state.ns, 'k2'));
    expect(await swapKymaFinalizers(kcp, suite.state.ns, 'k2')).to.equal('deleting');
    expect(await finalizersOf('k2')).to.deep.equal([
      'example.com/other',
      LIFECYCLE_MANAGER.kymaFinalizers[0],
    ]);
    await setFinalizers('k2', []);
    expect(await swapKymaFinalizers(kcp, suite.state.ns, 'k3')).to.equal('absent');
  });
});
