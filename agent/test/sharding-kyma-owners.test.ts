// The assignment's view of Kymas on a real KCP: only name, resourceVersion, runtime-id and owner label are kept (and
// the bucket), and a runtime-id finds its Kyma whoever owns it.
import { expect } from 'chai';
import { LABELS } from '@skr-watcher/api';
import { waitUntil } from '../../test/support/eventually.js';
import { kymaOfRuntimeId, ownerOf, ownershipOf, watchKymaOwners } from '../src/sharding/kyma-owners.js';
import { bucketOf } from '../src/sharding/ring.js';
import { createBareKyma } from './support/planes.js';
import { kcpNamespaceForSuite } from './support/suite-namespace.js';

describe('kyma owners view', function () {
  this.timeout(120_000);
  const suite = kcpNamespaceForSuite('kyma-owners');
  const createKyma = (name: string, labels: Record<string, string>) =>
    createBareKyma(suite.kcp, suite.name, name, { team: 'x', ...labels });

  it('keeps of a Kyma its name, version, runtime-id and owner, and hashes its bucket once', () => {
    const kept = ownershipOf({
      metadata: {
        name: 'kyma-a',
        namespace: 'kcp-system',
        resourceVersion: '42',
        labels: { [LABELS.runtimeId]: 'runtime-a', [LABELS.shardOwner]: 'agent-1', team: 'x' },
      },
    });
    expect(kept).to.deep.equal({
      metadata: {
        name: 'kyma-a',
        namespace: 'kcp-system',
        resourceVersion: '42',
        labels: { [LABELS.runtimeId]: 'runtime-a', [LABELS.shardOwner]: 'agent-1' },
      },
      bucket: bucketOf('kyma-a'),
    });
    expect(ownerOf(kept)).to.equal('agent-1');
    expect(
      ownerOf(ownershipOf({ metadata: { name: 'kyma-b', labels: { [LABELS.shardOwner]: '' } } })),
    ).to.equal(undefined);
    expect(ownerOf(undefined)).to.equal(undefined);
  });

  it('watches the namespace’s Kymas and finds a Kyma by runtime-id, the first by name when two share it', async () => {
    await createKyma('kyma-b', { [LABELS.runtimeId]: 'runtime-shared', [LABELS.shardOwner]: 'agent-2' });
    await createKyma('kyma-a', { [LABELS.runtimeId]: 'runtime-shared' });
    await createKyma('kyma-c', { [LABELS.runtimeId]: 'runtime-c' });
    const namespace = suite.name;
    const kymas = watchKymaOwners({ kubeConfig: suite.kcp, namespace });
    kymas.start();
    try {
      await kymas.waitForSync();
      await waitUntil('three Kymas in the view', () => kymas.keys().length === 3, 10_000, 20);
      const cached = kymas.get(`${namespace}/kyma-b`);
      expect(cached?.metadata.labels).to.deep.equal({
        [LABELS.runtimeId]: 'runtime-shared',
        [LABELS.shardOwner]: 'agent-2',
      });
      expect(Object.keys(cached ?? {}).sort()).to.deep.equal(['bucket', 'metadata']);
      expect(kymaOfRuntimeId(kymas, 'runtime-shared', namespace)).to.deep.equal({
        namespace,
        name: 'kyma-a',
      });
      expect(kymaOfRuntimeId(kymas, 'runtime-c', namespace)).to.deep.equal({ namespace, name: 'kyma-c' });
      expect(kymaOfRuntimeId(kymas, 'runtime-none', namespace)).to.equal(undefined);
    } finally {
      await kymas.stop();
    }
  });
});
