// A callback for a Kyma whose owner was killed is served as soon as its new owner is known, ahead of the takeover's
// claims (replica loss as users see it; decision 012). Two `skr-agent run --shard` processes with their
// mTLS listeners share 120 paused Kymas (claimed like any other, reconciled at no cost) and one probe Kyma with the
// sample module, named to come last in every listing, owned by the replica the test kills. The survivor's takeover
// claims the orphans in listing order, the probe last; an edit of the probe's Module CR made right after the kill,
// whose callback the webhook sends again and again (answered 503 while the dead replica still holds its Lease), must
// make the survivor claim the probe at once, among the first of the orphans, and reach its ModuleConfig.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS, watchEventFor } from '@skr-watcher/api';
import { mergePatchCustomObject } from '@skr-watcher/kube';
import { freePort, sharedEnvironment } from '@skr-watcher/testenv';
import { createBenchFleet } from '../../test/support/bench-fleet.js';
import { waitUntil } from '../../test/support/eventually.js';
import { seedKyma, seedSampleCatalog } from '../../test/support/kcp-seed.js';
import { moduleConfigName } from '../src/reconcile/index.js';
import { shardKeyOf } from '../src/sharding/placement.js';
import { createHashRing } from '../src/sharding/ring.js';
import { listenerFlags, runAgent, QUIET_REQUEUE_FLAGS, type AgentChild } from './support/agent-child.js';
import { createTestCa, issueTestLeaf, type TestCa } from './support/listener-certs.js';
import { sendCallback, tlsAgent } from './support/listener-client.js';
import { custom, getOrUndefined, refTo, untilCrdsServe } from './support/planes.js';
import { shardOwners } from './support/shard-owners.js';

/** Paused Kymas beside the probe: about half become orphans, so the takeover's claims take many rounds. */
const PAUSED = 120;
const PROBE = 'zz-probe';
const SAMPLE_GVK = { group: GROUP, version: KINDS.sample.version, kind: KINDS.sample.kind };

interface Replica extends AgentChild {
  identity: string;
  listenerPort: number;
}

describe('a callback for an orphaned Kyma is served as soon as its new owner is known', function () {
  this.timeout(420_000);
  const namespace = `orphan-cb-${process.pid}`;
  const probeSkrNamespace = `${namespace}-probe`;
  let kcp: KubeConfig;
  let skr: KubeConfig;
  let dir: string;
  let ca: TestCa;
  const replicas: Replica[] = [];

  async function startReplica(identity: string): Promise<Replica> {
    const listenerPort = await freePort();
    const tlsDir = await mkdtemp(join(dir, `${identity}-`));
    const replica: Replica = {
      identity,
      listenerPort,
      ...runAgent(
        (await sharedEnvironment()).plane('kcp').kubeconfigPath,
        namespace,
        [
          ...(await listenerFlags(tlsDir, ca, listenerPort)),
          '--shard',
          '--shard-identity',
          identity,
          '--peer-address',
          '127.0.0.1:0',
          '--lease-duration',
          '6s',
          '--renew-deadline',
          '4s',
          '--retry-period',
          '500ms',
          ...QUIET_REQUEUE_FLAGS,
        ],
        // Every claim's log line is read back.
        4_000_000,
      ),
    };
    replicas.push(replica);
    return replica;
  }

  const greetingOfProbe = async (): Promise<unknown> => {
    const config = (await getOrUndefined(() =>
      custom(kcp).getNamespacedCustomObject(
        refTo('moduleConfig', namespace, moduleConfigName(PROBE, 'sample')),
      ),
    )) as { spec?: { resource?: { spec?: { greeting?: unknown } } } } | undefined;
    return config?.spec?.resource?.spec?.greeting;
  };
  const describeState = () => replicas.map((r) => `--- ${r.identity}\n${r.output().slice(-3000)}`).join('\n');
  const wait = (what: string, check: () => Promise<boolean>, timeoutMs = 180_000) =>
    waitUntil(what, check, timeoutMs, 200).catch((error: unknown) => {
      throw new Error(`${what}\n${describeState()}`, { cause: error });
    });
  /** The Kymas a replica's log says it claimed, in the order written. */
  const claimsOf = (replica: Replica): string[] =>
    replica
      .output()
      .split('\n')
      .flatMap((line) => {
        try {
          const entry = JSON.parse(line) as { msg?: string; kyma?: string };
          return entry.msg === 'Kyma claimed' && entry.kyma ? [entry.kyma] : [];
        } catch {
          return [];
        }
      });

  before(async () => {
    const env = await sharedEnvironment();
    kcp = env.plane('kcp').kubeConfig();
    skr = env.plane('skr1').kubeConfig();
    await untilCrdsServe([kcp, skr]);
    await kcp.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
    await seedSampleCatalog(kcp, namespace, { moduleCrPerKyma: true });
    const kubeconfig = await readFile(env.plane('skr1').kubeconfigPath, 'utf8');
    await createBenchFleet({
      kcp,
      namespace,
      kymas: PAUSED,
      kubeconfigs: [kubeconfig],
      labels: { [LABELS.skipReconciliation]: 'true' },
      runtimeId: (i) => `${namespace}-${i}`,
    });
    await seedKyma(kcp, namespace, PROBE, kubeconfig, {
      spec: { sync: { namespace: probeSkrNamespace, moduleCatalog: false } },
      runtimeId: `${namespace}-probe`,
    });
    dir = await mkdtemp(join(tmpdir(), 'skr-orphan-cb-'));
    ca = createTestCa('kcp-test-ca');
    await Promise.all([startReplica('orphan-a'), startReplica('orphan-b')]);
    // Every Kyma with the owner the ring picks: the first replica's handovers to the second are over, so the owners
    // read before the kill are the ones the survivor must claim from.
    const ring = createHashRing(replicas.map((r) => r.identity));
    await wait('every Kyma is owned by the replica the ring picks for it', async () => {
      const owners = await shardOwners(kcp, namespace);
      return (
        owners.size === PAUSED + 1 &&
        [...owners].every(([name, owner]) => owner === ring.ownerOf(shardKeyOf({ metadata: { name } })))
      );
    });
    await wait('the probe’s Module CR is mirrored', async () => (await greetingOfProbe()) !== undefined);
  });

  after(async () => {
    await Promise.all(
      replicas.map(async (replica) => {
        if (replica.child.exitCode === null) replica.child.kill('SIGTERM');
        await replica.exited;
      }),
    );
    await kcp
      ?.makeApiClient(CoreV1Api)
      .deleteNamespace({ name: namespace })
      .catch(() => {});
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('the survivor claims the Kyma of a retried callback ahead of the other orphans and mirrors the edit', async () => {
    const owners = await shardOwners(kcp, namespace);
    const victim = replicas.find((r) => r.identity === owners.get(PROBE)) as Replica;
    const survivor = replicas.find((r) => r !== victim) as Replica;
    const orphans = [...owners].filter(([, owner]) => owner === victim.identity).map(([name]) => name);
    const claimedBefore = claimsOf(survivor).length;
    victim.child.kill('SIGKILL');
    await victim.exited;

    const moduleCr = refTo('sample', probeSkrNamespace, 'sample');
    const before = (await custom(skr).getNamespacedCustomObject(moduleCr)) as {
      metadata: { resourceVersion: string };
    };
    const greeting = `after ${victim.identity} died`;
    const edited = (await mergePatchCustomObject(custom(skr), moduleCr, { spec: { greeting } })) as {
      metadata: { uid: string; generation: number };
    };
    const body = JSON.stringify(
      watchEventFor({ namespace: probeSkrNamespace, name: 'sample' }, SAMPLE_GVK, {
        uid: edited.metadata.uid,
        generation: edited.metadata.generation,
        previousResourceVersion: before.metadata.resourceVersion,
      }),
    );
    const leaf = issueTestLeaf(ca, { commonName: `${namespace}-probe`, dnsNames: ['probe.skr.example.com'] });
    const agent = tlsAgent({ caPem: ca.certPem, certPem: leaf.certPem, keyPem: leaf.keyPem });
    // A webhook sends again after Retry-After (1 s); sent more often here (within the listener's budget of 20 per
    // second and runtime-id), so that the order of the claims shows what the callback changed.
    const answers: number[] = [];
    /** Retry-After of each 503: while the dead owner's Lease runs, the seconds until it expires. */
    const retryAfters: number[] = [];
    try {
      await waitUntil(
        `${survivor.identity} takes the probe’s callback`,
        async () => {
          const answer = await sendCallback(survivor.listenerPort, agent, { body });
          answers.push(answer.status);
          if (answer.status === 200) return true;
          expect(answer.status, answer.text).to.be.oneOf([503, 429]);
          if (answer.status === 503) retryAfters.push(Number(answer.headers['retry-after']));
          return false;
        },
        120_000,
        60,
      ).catch((error: unknown) => {
        throw new Error(`answers ${answers.join(',')}\n${describeState()}`, { cause: error });
      });
    } finally {
      agent.destroy();
    }
    await wait(
      `the probe’s ModuleConfig shows "${greeting}"`,
      async () => (await greetingOfProbe()) === greeting,
    );
    await wait(`${survivor.identity} claimed all ${orphans.length} orphans`, async () =>
      orphans.every((name) => claimsOf(survivor).includes(`${namespace}/${name}`)),
    );
    const claims = claimsOf(survivor).slice(claimedBefore);
    const position = claims.indexOf(`${namespace}/${PROBE}`);
    console.log(
      `      ${orphans.length} orphans; the probe claimed ${position + 1}. after ${answers.length} sends (${answers.filter((s) => s === 503).length} answered 503; Retry-After ${[...new Set(retryAfters)].join(', ')} s)`,
    );
    // The owner's Lease (6 s) was renewed at most 0.5 s before the kill: the first 503s say to come back seconds
    // later, when it has run out, not every second; never later than a lease duration and the margin.
    expect(retryAfters, 'Retry-After of the 503s').to.satisfy((values: number[]) =>
      values.some((value) => value >= 2),
    );
    expect(Math.max(...retryAfters), 'Retry-After of the 503s').to.be.at.most(7);
    // Listed last, the takeover alone would claim it among its last; claimed for its callback, among the first.
    expect(position, `claims in order: ${claims.join(', ')}`).to.be.within(0, Math.floor(orphans.length / 3));
  });
});
