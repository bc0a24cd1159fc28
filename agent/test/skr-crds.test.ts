// The CRD check of a new SKR client (decisions 012 and 016): every Kyma a replica takes
// over gets a new client, and its first pass checks the SKR's CRDs. The check decides on labels, the digest
// annotation and the resourceVersion; it reads metadata only, so a CRD's schema and managedFields (tens of kB each)
// are neither encoded by the API server nor parsed by the agent, and it finds the CRDs this project installed with
// one list from the watch cache, reading by name only those the list lacks. A replace that meets another pass's
// (HTTP 409) reads the CRD again and compares once more. Real API server; the client's response bound shows what was
// read, the request counters what was sent.
import { expect } from 'chai';
import {
  ApiextensionsV1Api,
  PatchStrategy,
  setHeaderOptions,
  type V1ObjectMeta,
} from '@kubernetes/client-node';
import { LABELS, MANAGED_BY } from '@skr-watcher/api';
import {
  createClusterClient,
  isResponseTooLarge,
  kubeRequestMetrics,
  type ClusterClient,
} from '@skr-watcher/kube';
import { startEnvironment, type Environment } from '@skr-watcher/testenv';
import { createRegistry, type Registry } from '@skr-watcher/telemetry';
import { CRD_DIGEST_ANNOTATION, SKR_CRDS, ensureSkrCrds } from '../src/reconcile/kyma/crds.js';

/**
 * Above the metadata-only list of the CRDs labelled ours (here the test environment's six or seven, 1.6 kB each with
 * their managedFields: 10 kB), below that list in full (32 kB).
 */
const METADATA_BOUND_BYTES = 12 * 1024;
const OURS = `${LABELS.managedBy}=${MANAGED_BY}`;
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** Requests sent, as [verb, resource, count], sorted. */
async function requestsOf(registry: Registry): Promise<[string, string, number][]> {
  const values = (await registry.getSingleMetric('skr_agent_kube_requests_total')?.get())?.values ?? [];
  return values
    .map((v): [string, string, number] => [String(v.labels['verb']), String(v.labels['resource']), v.value])
    .sort();
}

/** Waits until the watch cache's list of our CRDs (what the check reads) satisfies `done`, as a later pass would. */
async function untilListed(
  crds: ApiextensionsV1Api,
  done: (listed: Map<string, V1ObjectMeta>) => boolean | Promise<boolean>,
): Promise<void> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const { items } = await crds.listCustomResourceDefinition({ labelSelector: OURS, resourceVersion: '0' });
    if (await done(new Map(items.map((crd) => [crd.metadata?.name ?? '', crd.metadata ?? {}])))) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the watch cache of CRDs never caught up');
}

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

  it('checks current CRDs with one metadata-only list, far smaller than the CRDs', async () => {
    const registry = createRegistry();
    const counters = kubeRequestMetrics(registry);
    // A new client, as for a Kyma just taken over; a full list of the CRDs would fail with ResponseTooLargeError.
    const skr = await createClusterClient(env.plane('skr').kubeConfig(), {
      name: 'skr',
      maxResponseBytes: METADATA_BOUND_BYTES,
      metrics: { kind: 'skr', counters },
    });
    try {
      // The bound only means something if the list in full does not pass under it.
      const full = await skr.apiextensions
        .listCustomResourceDefinition({ labelSelector: OURS, resourceVersion: '0' })
        .catch((e: unknown) => e);
      expect(isResponseTooLarge(full), 'full list of our CRDs').to.equal(true);
      registry.resetMetrics();
      expect(await ensureSkrCrds(skr)).to.deep.equal({ installed: [], updated: [] });
    } finally {
      await skr.close();
    }
    expect(await requestsOf(registry)).to.deep.equal([['list', 'customresourcedefinitions', 1]]);
  });

  /** The Kyma CRD as an older agent left it, the watch cache (what a check lists) showing that. */
  async function olderKymaCrd(): Promise<{ crds: ApiextensionsV1Api; name: string }> {
    const crds = env.plane('skr').kubeConfig().makeApiClient(ApiextensionsV1Api);
    const name = SKR_CRDS[0].name;
    const older = await crds.readCustomResourceDefinition({ name });
    older.metadata!.annotations = { ...older.metadata?.annotations, [CRD_DIGEST_ANNOTATION]: 'older' };
    await crds.replaceCustomResourceDefinition({ name, body: older });
    await untilListed(crds, (listed) => listed.get(name)?.annotations?.[CRD_DIGEST_ANNOTATION] === 'older');
    return { crds, name };
  }
  const currentDigest = async (crds: ApiextensionsV1Api, name: string) =>
    (await crds.readCustomResourceDefinition({ name })).metadata?.annotations?.[CRD_DIGEST_ANNOTATION];

  /** A new SKR client whose first CRD replace lets `meanwhile` change the CRD just before it is sent. */
  async function clientRacedBy(meanwhile: () => Promise<void>): Promise<ClusterClient> {
    const skr = await createClusterClient(env.plane('skr').kubeConfig(), { name: 'skr' });
    const api = skr.apiextensions;
    const replace = api.replaceCustomResourceDefinition.bind(api);
    let raced = false;
    api.replaceCustomResourceDefinition = (async (...args: Parameters<typeof replace>) => {
      if (!raced) {
        raced = true;
        await meanwhile();
      }
      return replace(...args);
    }) as typeof replace;
    return skr;
  }

  it('still replaces a CRD of ours whose digest differs', async () => {
    const { crds, name } = await olderKymaCrd();
    const skr = await createClusterClient(env.plane('skr').kubeConfig(), { name: 'skr' });
    try {
      expect(await ensureSkrCrds(skr)).to.deep.equal({ installed: [], updated: [name] });
    } finally {
      await skr.close();
    }
    expect(await currentDigest(crds, name)).to.match(/^[0-9a-f]{16}$/);
  });

  // Kymas that share one SKR API server (bench:modules-scale puts 2,500 on each of two) check the same CRDs at once:
  // a replace conditional on the version one pass read meets another's (HTTP 409). Five Kymas went to Error that way
  // in the start-up burst of a 5,000-Kyma run; now the pass reads the CRD again and compares once more.
  it('finds the CRD current after another pass of the same SKR replaced it first, and does not fail', async () => {
    const { crds, name } = await olderKymaCrd();
    const skr = await clientRacedBy(async () => {
      // Another Kyma's pass: it replaces the CRD from the same listed version first.
      const other = await createClusterClient(env.plane('skr').kubeConfig(), { name: 'skr (other pass)' });
      try {
        expect(await ensureSkrCrds(other)).to.deep.equal({ installed: [], updated: [name] });
      } finally {
        await other.close();
      }
    });
    try {
      expect(await ensureSkrCrds(skr)).to.deep.equal({ installed: [], updated: [] });
    } finally {
      await skr.close();
    }
    expect(await currentDigest(crds, name)).to.match(/^[0-9a-f]{16}$/);
  });

  it('replaces it from the version read again when a change meanwhile left it old', async () => {
    const { crds, name } = await olderKymaCrd();
    const skr = await clientRacedBy(async () => {
      await crds.patchCustomResourceDefinition(
        { name, body: { metadata: { labels: { 'test.skr-watcher.io/touched': 'yes' } } } },
        mergePatch,
      );
    });
    try {
      expect(await ensureSkrCrds(skr)).to.deep.equal({ installed: [], updated: [name] });
    } finally {
      await skr.close();
    }
    expect(await currentDigest(crds, name)).to.match(/^[0-9a-f]{16}$/);
  });

  it("leaves someone else's CRD alone and installs a missing one, reading by name only what the list lacks", async () => {
    const crds = env.plane('skr').kubeConfig().makeApiClient(ApiextensionsV1Api);
    const [, theirs, missing] = SKR_CRDS.map((crd) => crd.name);
    // Upstream's CRD, as a lifecycle-manager would have installed it: were it taken for ours, it would be replaced.
    await crds.patchCustomResourceDefinition(
      {
        name: theirs!,
        body: {
          metadata: {
            labels: { [LABELS.managedBy]: 'lifecycle-manager' },
            annotations: { [CRD_DIGEST_ANNOTATION]: 'theirs' },
          },
        },
      },
      mergePatch,
    );
    await crds.deleteCustomResourceDefinition({ name: missing! });
    // Until the API server has removed it and its watch cache has seen both changes, the list still shows them.
    await untilListed(
      crds,
      async (listed) =>
        !listed.has(theirs!) &&
        !listed.has(missing!) &&
        !(await crds.readCustomResourceDefinition({ name: missing! }).catch(() => undefined)),
    );

    const registry = createRegistry();
    const skr = await createClusterClient(env.plane('skr').kubeConfig(), {
      name: 'skr',
      metrics: { kind: 'skr', counters: kubeRequestMetrics(registry) },
    });
    try {
      expect(await ensureSkrCrds(skr)).to.deep.equal({ installed: [missing], updated: [] });
    } finally {
      await skr.close();
    }
    const sent = await requestsOf(registry);
    // The list, a metadata read of each CRD it lacked, the install; then reads until the new CRD is Established.
    expect(sent.filter(([verb]) => verb !== 'get')).to.deep.equal([
      ['create', 'customresourcedefinitions', 1],
      ['list', 'customresourcedefinitions', 1],
    ]);
    expect(sent.find(([verb]) => verb === 'get')?.[2]).to.be.at.least(3);
    const upstreams = await crds.readCustomResourceDefinition({ name: theirs! });
    expect(upstreams.metadata?.annotations?.[CRD_DIGEST_ANNOTATION]).to.equal('theirs');
    expect(upstreams.metadata?.labels?.[LABELS.managedBy]).to.equal('lifecycle-manager');
  });
});
