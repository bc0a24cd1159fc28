// The owner label as one replica writes it on a real KCP: conditional on the version it decided on (a stale one
// meets a conflict), taken into the view at once, and remembered until the view shows a later version.
import { expect } from 'chai';
import { ApiException, CustomObjectsApi } from '@kubernetes/client-node';
import { LABELS } from '@skr-watcher/api';
import { ownershipOf, type KymaOwnership } from '../src/sharding/kyma-owners.js';
import { OwnerLabels } from '../src/sharding/owner-labels.js';
import { createBareKyma, kymaRef } from './support/planes.js';
import { kcpNamespaceForSuite } from './support/suite-namespace.js';

describe('owner labels', function () {
  this.timeout(120_000);
  const suite = kcpNamespaceForSuite('owner-labels');
  let custom: CustomObjectsApi;
  let namespace: string;
  before(() => {
    custom = suite.kcp.makeApiClient(CustomObjectsApi);
    namespace = suite.name;
  });
  const ref = (name: string) => kymaRef(namespace, name);
  const createKyma = async (name: string): Promise<KymaOwnership> =>
    ownershipOf(
      (await createBareKyma(suite.kcp, namespace, name, { [LABELS.runtimeId]: name })) as KymaOwnership,
    );
  const ownerOnKcp = async (name: string) =>
    ((await custom.getNamespacedCustomObject(ref(name))) as KymaOwnership).metadata.labels?.[
      LABELS.shardOwner
    ];

  it('writes the owner, hands the written Kyma to the view, and waits for the view before writing that version again', async () => {
    const observed: KymaOwnership[] = [];
    const labels = new OwnerLabels({
      api: custom,
      namespace,
      observeWritten: (written) => observed.push(written as KymaOwnership),
    });
    const kyma = await createKyma('kyma-a');
    await labels.write(kyma, 'agent-1');
    expect(await ownerOnKcp('kyma-a')).to.equal('agent-1');
    expect(observed.map((k) => k.metadata.labels?.[LABELS.shardOwner])).to.deep.equal(['agent-1']);
    expect(labels.awaitingOwnWrite(kyma), 'the version it decided on').to.equal(true);
    expect(
      labels.awaitingOwnWrite(ownershipOf(observed[0] as KymaOwnership)),
      'the written version',
    ).to.equal(false);
    labels.forget(`${namespace}/kyma-a`);
    expect(labels.awaitingOwnWrite(kyma), 'the view moved on').to.equal(false);
  });

  it('meets a conflict when the Kyma changed since the version it decided on, and writes nothing', async () => {
    const labels = new OwnerLabels({ api: custom, namespace, observeWritten: () => {} });
    const kyma = await createKyma('kyma-b');
    await labels.write(kyma, 'agent-1');
    const conflict = await labels.write(kyma, 'agent-2').then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(conflict).to.be.instanceOf(ApiException);
    expect((conflict as ApiException<unknown>).code).to.equal(409);
    expect(await ownerOnKcp('kyma-b')).to.equal('agent-1');
  });

  it('marks a key busy from the decision to write until the write is done', () => {
    const labels = new OwnerLabels({ api: custom, namespace, observeWritten: () => {} });
    expect(labels.busy('ns/a')).to.equal(false);
    labels.begin('ns/a');
    expect(labels.busy('ns/a')).to.equal(true);
    expect(labels.busy('ns/b')).to.equal(false);
    labels.done('ns/a');
    expect(labels.busy('ns/a')).to.equal(false);
  });
});
