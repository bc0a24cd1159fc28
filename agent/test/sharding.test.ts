// Sharding on real planes (decision 012): real skr-agent processes with --shard share the Kymas of one KCP
// namespace; every reconcile's start and end is journaled with its replica, and across a join, a graceful leave
// and a SIGKILL no Kyma is ever reconciled by two replicas at once, and every Kyma ends owned by a live replica.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { CoreV1Api, CoordinationV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS } from '@skr-watcher/api';
import { startEnvironment, type Environment } from '@skr-watcher/testenv';
import { waitUntil } from '../../test/support/eventually.js';
import { overlaps, reconcileIntervals } from '../../test/support/reconcile-journal.js';
import { shardOwners } from './support/shard-owners.js';
import { runAgent, type AgentChild } from './support/agent-child.js';

const KYMAS = 24;

interface Replica extends AgentChild {
  identity: string;
  journal: string;
  /** hrtime (ns) once the process is known dead: its open reconciles ended by then at the latest. */
  deadAt?: bigint;
}

describe('skr-agent --shard on real planes', function () {
  this.timeout(400_000);
  let env: Environment;
  let kcp: KubeConfig;
  let dir: string;
  const namespace = 'sharding';
  const replicas: Replica[] = [];

  function startReplica(identity: string): Replica {
    const journal = join(dir, `${identity}.journal`);
    const started = runAgent(env.plane('kcp').kubeconfigPath, namespace, [
      '--no-listener',
      '--shard',
      '--shard-identity',
      identity,
      // Short Leases so that expiry after SIGKILL is part of the test, not a wait of 15 s.
      '--lease-duration',
      '4s',
      '--renew-deadline',
      '3s',
      '--retry-period',
      '500ms',
      // Reconciles run back to back, so a handover without the handshake would overlap.
      '--requeue-ready',
      '300ms',
      '--requeue-processing',
      '300ms',
      '--requeue-warning',
      '300ms',
      '--workers',
      '4',
      '--reconcile-journal',
      journal,
    ]);
    const replica: Replica = { identity, journal, ...started };
    void replica.exited.then(() => (replica.deadAt = process.hrtime.bigint()));
    replicas.push(replica);
    return replica;
  }

  const owners = () => shardOwners(kcp, namespace);
  const allOwnedBy = async (live: string[]) => {
    const current = await owners();
    return current.size === KYMAS && [...current.values()].every((owner) => !!owner && live.includes(owner));
  };
  const reconciledAfter = (identity: string[], after: bigint, kymas: string[]) => {
    const byKyma = reconcileIntervals(replicas);
    return kymas.every((kyma) =>
      (byKyma.get(`${namespace}/${kyma}`) ?? []).some((i) => identity.includes(i.replica) && i.start > after),
    );
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'skr-shard-'));
    env = await startEnvironment({ planes: ['kcp', 'skr1'] });
    kcp = env.plane('kcp').kubeConfig();
    const core = kcp.makeApiClient(CoreV1Api);
    const api = kcp.makeApiClient(CustomObjectsApi);
    const kubeconfig = readFileSync(env.plane('skr1').kubeconfigPath, 'utf8');
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    for (let i = 0; i < KYMAS; i++) {
      const name = `kyma-${i}`;
      await core.createNamespacedSecret({
        namespace,
        body: {
          metadata: { name: `kubeconfig-${name}`, labels: { [LABELS.kymaName]: name } },
          stringData: { config: kubeconfig },
        },
      });
      await api.createNamespacedCustomObject({
        group: GROUP,
        version: KINDS.kyma.version,
        plural: KINDS.kyma.plural,
        namespace,
        body: {
          apiVersion: `${GROUP}/${KINDS.kyma.version}`,
          kind: 'Kyma',
          metadata: { name, labels: { [LABELS.runtimeId]: `runtime-${i}` } },
          spec: { channel: 'regular', modules: [], sync: { namespace: `shard-${i}` } },
        },
      });
    }
  });

  afterEach(() => {
    for (const replica of replicas) if (replica.child.exitCode === null) replica.child.kill('SIGKILL');
  });

  after(async () => {
    await env?.stop();
  });

  it('never reconciles one Kyma on two replicas at once across a join, a graceful leave and a SIGKILL', async () => {
    const describe = async () =>
      `owners: ${JSON.stringify(Object.fromEntries(await owners()))}\n${replicas
        .map((r) => `--- ${r.identity}\n${r.output().slice(-3000)}`)
        .join('\n')}`;
    const wait = (what: string, check: () => Promise<boolean>) =>
      waitUntil(what, check, 90_000, 250).catch(async (error: unknown) => {
        throw new Error(`${what}\n${await describe()}`, { cause: error });
      });

    const [a, b, c] = ['replica-a', 'replica-b', 'replica-c'].map(startReplica) as [
      Replica,
      Replica,
      Replica,
    ];
    await wait('three replicas own every Kyma', () => allOwnedBy(['replica-a', 'replica-b', 'replica-c']));
    await wait('each of the three owns some Kymas', async () => {
      const counts = new Set((await owners()).values());
      return counts.size === 3;
    });

    const d = startReplica('replica-d');
    await wait('the fourth replica takes a share', async () =>
      [...(await owners()).values()].includes('replica-d'),
    );
    const beforeJoin = [...(await owners()).values()];
    expect(beforeJoin.filter((o) => o === 'replica-d').length).to.be.within(1, KYMAS / 2);

    // Graceful leave: its Kymas are handed over before its process ends.
    const ofB = [...(await owners())].filter(([, o]) => o === 'replica-b').map(([k]) => k);
    b.child.kill('SIGTERM');
    const code = await b.exited;
    expect(
      code,
      `SIGTERM is a clean exit (output ${b.output().length} chars):\n${b.output().slice(-3000)}`,
    ).to.equal(0);
    await wait('no Kyma is owned by the replica that left', () =>
      allOwnedBy(['replica-a', 'replica-c', 'replica-d']),
    );

    // SIGKILL: its Kymas wait out its Lease, then survivors claim them.
    await wait('the killed replica owns something', async () =>
      [...(await owners()).values()].includes('replica-c'),
    );
    const ofC = [...(await owners())].filter(([, o]) => o === 'replica-c').map(([k]) => k);
    c.child.kill('SIGKILL');
    await c.exited;
    const killedAt = c.deadAt as bigint;
    await wait('survivors own every Kyma', () => allOwnedBy(['replica-a', 'replica-d']));
    await wait('survivors reconciled every Kyma of the killed replica', async () =>
      reconciledAfter(['replica-a', 'replica-d'], killedAt, ofC),
    );
    await wait('the Kymas of the replica that left were reconciled by others', async () =>
      reconciledAfter(['replica-a', 'replica-c', 'replica-d'], b.deadAt as bigint, ofB),
    );

    a.child.kill('SIGTERM');
    d.child.kill('SIGTERM');
    await Promise.all([a.exited, d.exited]);
    const byKyma = reconcileIntervals(replicas);
    const reconciles = [...byKyma.values()].reduce((sum, list) => sum + list.length, 0);
    expect(reconciles, 'the journals recorded reconciles').to.be.greaterThan(KYMAS * 4);
    expect(overlaps(byKyma), 'overlapping reconciles of one Kyma').to.deep.equal([]);

    // Released membership Leases say so: peers need not wait them out.
    const leases = await kcp
      .makeApiClient(CoordinationV1Api)
      .listNamespacedLease({ namespace, labelSelector: LABELS.shardRing });
    const held = leases.items.filter((l) => l.spec?.holderIdentity).map((l) => l.spec?.holderIdentity);
    expect(
      held.filter((holder) => holder !== 'replica-c'),
      `Leases still held after every graceful replica stopped\n${a.output().slice(-3000)}`,
    ).to.deep.equal([]);
  });
});
