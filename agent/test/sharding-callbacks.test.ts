// Forwarding of callbacks between sharded replicas (decision 012) as processes: two `skr-agent run
// --shard` with their direct mTLS listeners share the Kymas of a KCP namespace on the shared planes. Requeues and
// resync are an hour apart and the agent does not watch SKRs, so only a callback explains a Module CR edit reaching
// its ModuleConfig. A callback signed with an SKR's certificate and sent to the replica that does not own its Kyma
// is answered like any other and reaches the owner over the peer endpoint; one sent to the owner is not forwarded.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, KINDS, watchEventFor } from '@skr-watcher/api';
import { mergePatchCustomObject } from '@skr-watcher/kube';
import { freePort, sharedEnvironment } from '@skr-watcher/testenv';
import { waitUntil } from '../../test/support/eventually.js';
import { seedKyma, seedSampleCatalog } from '../../test/support/kcp-seed.js';
import { moduleConfigName } from '../src/reconcile/index.js';
import { shardKeyOf } from '../src/sharding/placement.js';
import { createHashRing } from '../src/sharding/ring.js';
import { listenerFlags, QUIET_REQUEUE_FLAGS, runAgent, type AgentChild } from './support/agent-child.js';
import { shardOwners } from './support/shard-owners.js';
import { createTestCa, issueTestLeaf, type TestCa } from './support/listener-certs.js';
import { sendCallback, tlsAgent } from './support/listener-client.js';
import { custom, getOrUndefined, refTo, untilCrdsServe } from './support/planes.js';

const KYMAS = 6;
/** How long the owner may take to mirror a callback's edit: far below any requeue or resync of these replicas. */
const MIRRORED_WITHIN_MS = 10_000;
const SAMPLE_GVK = { group: GROUP, version: KINDS.sample.version, kind: KINDS.sample.kind };

/** `count` names `<prefix>-<i>`, half of them owned by each member of the ring. */
function namesSplitBy(prefix: string, members: [string, string], count: number): string[] {
  const ring = createHashRing(members);
  const byOwner = new Map<string | undefined, string[]>(members.map((member) => [member, []]));
  for (let i = 0; members.some((member) => (byOwner.get(member) as string[]).length < count / 2); i++) {
    const name = `${prefix}-${i}`;
    const owned = byOwner.get(ring.ownerOf(shardKeyOf({ metadata: { name } })));
    if (owned && owned.length < count / 2) owned.push(name);
  }
  return [...byOwner.values()].flat();
}

interface Replica extends AgentChild {
  identity: string;
  listenerPort: number;
  metricsPort: number;
}

describe('sharded skr-agent processes forward a callback to the Kyma’s owner', function () {
  // The shared planes may still have to start (over two minutes on a loaded 2-core machine).
  this.timeout(300_000);
  const namespace = `fwd-${process.pid}`;
  // The names come from the process id, so the ring is asked for a set it splits evenly: with six names picked blindly
  // one replica would own all of them in about one run in 32.
  const kymas = namesSplitBy(namespace, ['fwd-a', 'fwd-b'], KYMAS);
  let kcp: KubeConfig;
  let skr: KubeConfig;
  let dir: string;
  let ca: TestCa;
  const replicas: Replica[] = [];

  async function startReplica(identity: string): Promise<Replica> {
    const listenerPort = await freePort();
    const metricsPort = await freePort();
    const tlsDir = await mkdtemp(join(dir, `${identity}-`));
    const replica: Replica = {
      identity,
      listenerPort,
      metricsPort,
      ...runAgent((await sharedEnvironment()).plane('kcp').kubeconfigPath, namespace, [
        ...(await listenerFlags(tlsDir, ca, listenerPort)),
        '--metrics-address',
        `127.0.0.1:${metricsPort}`,
        '--shard',
        '--shard-identity',
        identity,
        // Peers learn this replica's peer endpoint from its Lease (advertised as 127.0.0.1:<port>).
        '--peer-address',
        '127.0.0.1:0',
        '--lease-duration',
        '6s',
        '--renew-deadline',
        '4s',
        '--retry-period',
        '500ms',
        ...QUIET_REQUEUE_FLAGS,
      ]),
    };
    replicas.push(replica);
    return replica;
  }

  const owners = () => shardOwners(kcp, namespace);
  const greetingOf = async (kyma: string): Promise<unknown> => {
    const config = (await getOrUndefined(() =>
      custom(kcp).getNamespacedCustomObject(
        refTo('moduleConfig', namespace, moduleConfigName(kyma, 'sample')),
      ),
    )) as { spec?: { resource?: { spec?: { greeting?: unknown } } } } | undefined;
    return config?.spec?.resource?.spec?.greeting;
  };
  /** The sum of a counter's samples on a replica's /metrics whose labels include `labels` (e.g. `code="202"`). */
  const counter = async (replica: Replica, name: string, labels: string): Promise<number> => {
    const text = await (await fetch(`http://127.0.0.1:${replica.metricsPort}/metrics`)).text();
    return [...text.matchAll(new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`, 'gm'))]
      .filter(([, found]) => found?.includes(labels))
      .reduce((sum, [, , value]) => sum + Number(value), 0);
  };
  const forwardMetrics = async (accepting: Replica, owner: Replica) => ({
    forwarded: await counter(accepting, 'skr_agent_forwarded_total', 'outcome="accepted"'),
    received: await counter(owner, 'skr_agent_forwarded_received_total', 'code="202"'),
  });
  const describeState = async () =>
    `owners: ${JSON.stringify(Object.fromEntries(await owners().catch(() => new Map())))}\n${replicas
      .map((r) => `--- ${r.identity}\n${r.output().slice(-3000)}`)
      .join('\n')}`;
  const wait = (what: string, check: () => Promise<boolean>, timeoutMs = 90_000) =>
    waitUntil(what, check, timeoutMs, 100).catch(async (error: unknown) => {
      throw new Error(`${what}\n${await describeState()}`, { cause: error });
    });

  /**
   * Edits the Kyma's Module CR in the SKR, then posts the callback its webhook sends for that UPDATE (v2 body with
   * the fingerprint) to `replica`, with the SKR's client certificate. Resolves to the listener's answer and the time
   * the edit took to show in the ModuleConfig.
   */
  async function editAndCallBack(kyma: string, replica: Replica, greeting: string) {
    const moduleCr = refTo('sample', kyma, 'sample');
    const before = (await custom(skr).getNamespacedCustomObject(moduleCr)) as {
      metadata: { resourceVersion: string };
    };
    const edited = (await mergePatchCustomObject(custom(skr), moduleCr, { spec: { greeting } })) as {
      metadata: { uid: string; generation: number };
    };
    const body = watchEventFor({ namespace: kyma, name: 'sample' }, SAMPLE_GVK, {
      uid: edited.metadata.uid,
      generation: edited.metadata.generation,
      previousResourceVersion: before.metadata.resourceVersion,
    });
    const leaf = issueTestLeaf(ca, { commonName: kyma, dnsNames: [`${kyma}.skr.example.com`] });
    const sent = Date.now();
    const agent = tlsAgent({ caPem: ca.certPem, certPem: leaf.certPem, keyPem: leaf.keyPem });
    const answer = await sendCallback(replica.listenerPort, agent, { body: JSON.stringify(body) }).finally(
      () => agent.destroy(),
    );
    if (answer.status === 200) {
      await wait(
        `the ModuleConfig of ${kyma} shows "${greeting}"`,
        async () => (await greetingOf(kyma)) === greeting,
        MIRRORED_WITHIN_MS,
      );
    }
    return { answer, mirroredAfterMs: Date.now() - sent };
  }

  before(async () => {
    const env = await sharedEnvironment();
    kcp = env.plane('kcp').kubeConfig();
    skr = env.plane('skr1').kubeConfig();
    await untilCrdsServe([kcp, skr]);
    await kcp.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
    // The SKR is shared with other suites: each Kyma has an SKR namespace of its own and no catalog copy.
    await seedSampleCatalog(kcp, namespace, { moduleCrPerKyma: true });
    const kubeconfig = await readFile(env.plane('skr1').kubeconfigPath, 'utf8');
    for (const kyma of kymas)
      await seedKyma(kcp, namespace, kyma, kubeconfig, {
        spec: { sync: { namespace: kyma, moduleCatalog: false } },
      });

    dir = await mkdtemp(join(tmpdir(), 'skr-fwd-'));
    ca = createTestCa('kcp-test-ca');
    await Promise.all([startReplica('fwd-a'), startReplica('fwd-b')]);
    await wait('each replica owns some Kymas and every Kyma has an owner', async () => {
      const current = [...(await owners()).values()];
      return (
        current.length === KYMAS &&
        current.every((owner) => owner === 'fwd-a' || owner === 'fwd-b') &&
        new Set(current).size === 2
      );
    });
    await wait('every Kyma’s Module CR is mirrored', async () =>
      (await Promise.all(kymas.map(greetingOf))).every((greeting) => greeting !== undefined),
    );
  });

  after(async () => {
    await Promise.all(
      replicas.map(async (replica) => {
        if (replica.child.exitCode === null) replica.child.kill('SIGTERM');
        await replica.exited;
      }),
    );
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('a callback accepted by the replica that does not own the Kyma reaches the owner', async () => {
    const current = await owners();
    for (const [accepting, owner] of [replicas, [...replicas].reverse()] as [Replica, Replica][]) {
      const kyma = kymas.find((k) => current.get(k) === owner.identity) as string;
      const before = await forwardMetrics(accepting, owner);
      const { answer, mirroredAfterMs } = await editAndCallBack(kyma, accepting, `via ${accepting.identity}`);
      expect(answer.status, answer.text).to.equal(200);
      expect(answer.json).to.include({ code: 200, reason: 'Accepted' });
      const expected = JSON.stringify({ forwarded: before.forwarded + 1, received: before.received + 1 });
      // The counters move once the owner's answer to the forward is in, which may be just after the mirror.
      await wait(
        `${accepting.identity} counts one forward accepted, ${owner.identity} one received: ${expected}`,
        async () => JSON.stringify(await forwardMetrics(accepting, owner)) === expected,
        5_000,
      );
      expect((await owners()).get(kyma), 'the Kyma kept its owner').to.equal(owner.identity);
      console.log(
        `      ${accepting.identity} -> ${owner.identity}: mirrored ${mirroredAfterMs} ms after the callback`,
      );
    }
  });

  it('a callback accepted by the owner itself is not forwarded', async () => {
    const current = await owners();
    const [owner, other] = replicas as [Replica, Replica];
    const kyma = kymas.find((k) => current.get(k) === owner.identity) as string;
    const before = await forwardMetrics(owner, other);
    const { answer } = await editAndCallBack(kyma, owner, `at ${owner.identity}`);
    expect(answer.status, answer.text).to.equal(200);
    expect(await forwardMetrics(owner, other)).to.deep.equal(before);
  });

  // Last: it kills a replica. A webhook that got 200 never sends again, so 200 must mean the owner has it.
  it('a callback for a Kyma whose owner was killed (-9) is answered 503 with Retry-After until the survivor owns it', async () => {
    const current = await owners();
    const [survivor, victim] = replicas as [Replica, Replica];
    const kyma = kymas.find((k) => current.get(k) === victim.identity) as string;
    victim.child.kill('SIGKILL');
    await victim.exited;
    // The victim's Lease (6 s) has not expired: the survivor still names it the owner, and cannot reach it.
    const greeting = `after ${victim.identity} died`;
    const { answer } = await editAndCallBack(kyma, survivor, greeting);
    expect(answer.status, answer.text).to.equal(503);
    // Send again once the victim's Lease has run out on the survivor's clock (+0.5 s), not every second before.
    expect(Number(answer.headers['retry-after'])).to.be.within(1, 7);
    expect(answer.json?.message).to.contain('did not reach the replica that owns the Kyma');
    expect(answer.json?.message).to.contain(`the owner ${victim.identity} of Kyma`);
    // As the webhook does: send again after Retry-After until taken; then the edit is in the ModuleConfig.
    let retries = 0;
    await wait(
      `${survivor.identity} takes the callback for ${kyma} once it owns the Kyma`,
      async () => {
        retries++;
        const again = await editAndCallBack(kyma, survivor, greeting);
        if (again.answer.status === 200) return true;
        expect(again.answer.status, again.answer.text).to.equal(503);
        const retryAfter = Number(again.answer.headers['retry-after']);
        await new Promise((resolve) => setTimeout(resolve, 1_000 * retryAfter));
        return false;
      },
      60_000,
    );
    expect((await owners()).get(kyma)).to.equal(survivor.identity);
    console.log(`      answered 503 until ${survivor.identity} owned ${kyma}: ${retries} sends`);
  });
});
