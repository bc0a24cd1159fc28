// The CRD check of a new SKR client (decision 012, session 8): every Kyma a replica takes over gets a new client,
// and its first pass checks the SKR's CRDs. The check decides on labels, the digest annotation and the
// resourceVersion; it reads metadata only, so a CRD's schema and managedFields (tens of kB each) are neither
// encoded by the API server nor parsed by the agent. Real API server; the client's response bound shows what was
// read.
import { expect } from 'chai';
import { ApiextensionsV1Api } from '@kubernetes/client-node';
import { createClusterClient, isResponseTooLarge, kubeRequestMetrics } from '@skr-watcher/kube';
import { startEnvironment, type Environment } from '@skr-watcher/testenv';
import { createRegistry } from '@skr-watcher/telemetry';
import { CRD_DIGEST_ANNOTATION, SKR_CRDS, ensureSkrCrds } from '../src/reconcile/crds.js';

/** Above a CRD's metadata (1–2 kB with its managedFields), below any of the three CRDs in full (4–8 kB). */
const METADATA_BOUND_BYTES = 3 * 1024;

describe('SKR CRD check (metadata only)', function () {
  this.timeout(120_000);
  let env: Environment;

  before(async () => {
    env = await startEnvironment({ planes: ['skr'] });
    // Bring the CRDs to this version once, as an earlier agent's pass would have.
    const first = await createClusterClient(env.plane('skr').kubeConfig(), { name: 'skr' });
    try {
      await ensureSkrCrds(first);
    } finally {
      await first.close();
    }
  });
  after(async () => env?.stop());

  it('checks current CRDs with one metadata read each, far smaller than the CRDs', async () => {
    const registry = createRegistry();
    const counters = kubeRequestMetrics(registry);
    // A new client, as for a Kyma just taken over; a full CRD read would fail with ResponseTooLargeError.
    const skr = await createClusterClient(env.plane('skr').kubeConfig(), {
      name: 'skr',
      maxResponseBytes: METADATA_BOUND_BYTES,
      metrics: { kind: 'skr', counters },
    });
    try {
      // The bound only means something if no full read passes under it.
      for (const { name } of SKR_CRDS) {
        const full = await skr.apiextensions.readCustomResourceDefinition({ name }).catch((e: unknown) => e);
        expect(isResponseTooLarge(full), `full read of ${name}`).to.equal(true);
      }
      expect(await ensureSkrCrds(skr)).to.deep.equal({ installed: [], updated: [] });
    } finally {
      await skr.close();
    }
    const requests = (await registry.getSingleMetric('skr_agent_kube_requests_total')?.get())?.values ?? [];
    expect(requests.map((v) => [v.labels['verb'], v.labels['resource'], v.value])).to.deep.equal([
      ['get', 'customresourcedefinitions', 2 * SKR_CRDS.length],
    ]);
  });

  it('still replaces a CRD of ours whose digest differs', async () => {
    const crds = env.plane('skr').kubeConfig().makeApiClient(ApiextensionsV1Api);
    const name = SKR_CRDS[0].name;
    const older = await crds.readCustomResourceDefinition({ name });
    older.metadata!.annotations = { ...older.metadata?.annotations, [CRD_DIGEST_ANNOTATION]: 'older' };
    await crds.replaceCustomResourceDefinition({ name, body: older });
    const skr = await createClusterClient(env.plane('skr').kubeConfig(), { name: 'skr' });
    try {
      expect(await ensureSkrCrds(skr)).to.deep.equal({ installed: [], updated: [name] });
    } finally {
      await skr.close();
    }
    const now = await crds.readCustomResourceDefinition({ name });
    expect(now.metadata?.annotations?.[CRD_DIGEST_ANNOTATION]).to.match(/^[0-9a-f]{16}$/);
  });
});
