// The fault suite (bar: nothing lost): on real planes with the real binaries (test/support/system: a KCP,
// two SKRs, skr-agent, one skr-webhook per SKR), an edit stream of the sample Module CR in every SKR that ends
// *during* each fault; once the fault is over, every ModuleConfig must equal its Module CR within 30 s. Requeues
// and the resync are an hour apart here, so only callbacks, retries and the agent's own recovery can explain it.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { expect } from 'chai';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS } from '@skr-watcher/api';
import { mergePatchCustomObject } from '@skr-watcher/kube';
import { freePort } from '@skr-watcher/testenv';
import { moduleConfigName } from '../../agent/src/reconcile/index.js';
import { bucketKey, bucketOf, createHashRing } from '../../agent/src/sharding/index.js';
import type { Child } from '../support/system/children.js';
import { SAMPLE_MODULE, startLocalSystem, waitFor, type LocalSystem } from '../support/system/index.js';

/** The bar: every ModuleConfig equals its Module CR this long after the fault ended. */
const CONVERGED_WITHIN_MS = 30_000;
const { module: MODULE, ...MODULE_CR } = SAMPLE_MODULE;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('faults: nothing lost after any fault (real planes)', function () {
  this.timeout(900_000);
  let parent: string;
  let system: LocalSystem;
  /** The agent processes running now: the system's, or the ones a case started in its place. */
  let agents: Child[] = [];
  const figures: string[] = [];

  before(async () => {
    parent = await mkdtemp(join(tmpdir(), 'skr-faults-'));
    system = await startLocalSystem({ dir: join(parent, 'system') });
    agents = [system.agent];
  });
  after(async () => {
    for (const agent of agents) await agent.stop(2_000).catch(() => {});
    await system?.stop();
    if (parent) await rm(parent, { recursive: true, force: true });
    if (figures.length > 0)
      console.log(`      converged after the fault ended:\n        ${figures.join('\n        ')}`);
  });

  /** Edits the sample Module CR of every SKR every 200 ms until stopped; writes refused during a fault are skipped. */
  function editStream(label: string) {
    let running = true;
    let written = 0;
    const loop = (async () => {
      for (let i = 0; running; i++) {
        await Promise.all(
          system.skrs.map((skr) =>
            mergePatchCustomObject(skr.kubeConfig().makeApiClient(CustomObjectsApi), MODULE_CR, {
              spec: { greeting: `${label} ${i}` },
            }).then(
              () => written++,
              () => {},
            ),
          ),
        );
        await sleep(200);
      }
    })();
    return {
      async stop(): Promise<number> {
        running = false;
        await loop;
        return written;
      },
    };
  }

  /** Waits until each SKR's Module CR spec equals its ModuleConfig's copy; resolves to the time it took. */
  async function converged(what: string, withinMs = CONVERGED_WITHIN_MS): Promise<number> {
    const started = Date.now();
    const kcp = system.kcp.makeApiClient(CustomObjectsApi);
    const lag: string[] = [];
    await waitFor(
      `every ModuleConfig equals its Module CR within ${withinMs / 1000} s after ${what}`,
      async () => {
        lag.length = 0;
        for (const skr of system.skrs) {
          const cr = (await skr
            .kubeConfig()
            .makeApiClient(CustomObjectsApi)
            .getNamespacedCustomObject(MODULE_CR)) as {
            spec?: unknown;
          };
          const config = (await kcp.getNamespacedCustomObject({
            group: GROUP,
            version: KINDS.moduleConfig.version,
            namespace: system.namespace,
            plural: KINDS.moduleConfig.plural,
            name: moduleConfigName(skr.name, MODULE),
          })) as { spec?: { resource?: { spec?: unknown } } };
          if (!isDeepStrictEqual(cr.spec, config.spec?.resource?.spec))
            lag.push(
              `${skr.name}: SKR ${JSON.stringify(cr.spec)} KCP ${JSON.stringify(config.spec?.resource?.spec)}`,
            );
        }
        return lag.length === 0;
      },
      started + withinMs,
    ).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}; still apart: ${lag.join('; ')}`, { cause: error });
    });
    const took = Date.now() - started;
    figures.push(`${what}: ${(took / 1000).toFixed(1)} s`);
    return took;
  }

  /** Runs an edit stream, starts the fault 1 s in, ends the stream `streamInFaultMs` later, then ends the fault. */
  async function underFault(
    what: string,
    fault: {
      begin: () => Promise<void>;
      end: () => Promise<void>;
      streamInFaultMs?: number;
      faultMs?: number;
      withinMs?: number;
    },
  ): Promise<void> {
    const stream = editStream(what);
    await sleep(1_000);
    const begun = Date.now();
    await fault.begin();
    await sleep(fault.streamInFaultMs ?? 2_000);
    const written = await stream.stop();
    expect(written, 'the stream wrote before and during the fault').to.be.greaterThan(0);
    const left = (fault.faultMs ?? 0) - (Date.now() - begun);
    if (left > 0) await sleep(left);
    await fault.end();
    await converged(what, fault.withinMs);
  }

  it('webhook stopped 30 s: a restarted webhook makes the agent look at its SKR at once', async () => {
    await underFault('webhook stopped 30 s', {
      begin: () => Promise.all(system.skrs.map((skr) => skr.webhook.stop())).then(() => {}),
      end: () => Promise.all(system.skrs.map((skr) => skr.restartWebhook())).then(() => {}),
      streamInFaultMs: 3_000,
      faultMs: 30_000,
    });
  });

  it('KCP API server restart', async () => {
    const kcp = system.env.plane('kcp');
    await underFault('KCP API server restart', {
      begin: () => kcp.stopApiServer(),
      end: () => kcp.startApiServer(),
    });
  });

  it('SKR API server restart', async () => {
    const skr = system.env.plane('skr1');
    await underFault('SKR API server restart (skr1)', {
      // The stream's last writes to skr1 fail while it is down; those to skr2 go on.
      begin: () => skr.stopApiServer(),
      end: () => skr.startApiServer(),
    });
  });

  it('etcd stop/start (every API server loses its storage)', async () => {
    await underFault('etcd stop/start', {
      begin: () => system.env.stopEtcd(),
      end: () => system.env.startEtcd(),
      faultMs: 5_000,
    });
  });

  it('agent kill -9', async () => {
    const [agent] = agents as [Child];
    await underFault('agent kill -9', {
      begin: async () => {
        process.kill(agent.pid, 'SIGKILL');
        await agent.exited;
      },
      end: async () => {
        agents = [agent.relaunch()];
        await waitForReady(system.agentMetricsPort);
      },
    });
  });

  it('forward to a dead owner: two sharded replicas, the owner of skr1 killed -9', async () => {
    // Replica A takes the webhooks' callbacks (the system's listener port); B owns skr1's Kyma and is killed.
    for (const agent of agents) await agent.stop(5_000);
    const [template] = agents as [Child];
    const a = 'fault-a';
    const b =
      Array.from({ length: 50 }, (_, i) => `fault-b-${i}`).find(
        (id) =>
          createHashRing([a, id]).ownerOf(bucketKey(bucketOf('skr1'))) === id &&
          createHashRing([a, id]).ownerOf(bucketKey(bucketOf('skr2'))) === a,
      ) ?? 'fault-b-0';
    const shard = (identity: string) => [
      '--shard',
      '--shard-identity',
      identity,
      '--peer-address',
      '127.0.0.1:0',
      '--lease-duration',
      '8s',
      '--renew-deadline',
      '6s',
      '--retry-period',
      '500ms',
    ];
    const replicaA = template.relaunch({ args: [...template.args, ...shard(a)] });
    const metricsB = await freePort();
    const replicaB = template.relaunch({
      name: 'skr-agent (b)',
      logFile: `${template.logFile}.b`,
      args: [
        ...withFlag(template.args, '--listen-address', `127.0.0.1:${await freePort()}`),
        ...shard(b),
      ].map((arg, i, all) =>
        all[i - 1] === '--metrics-address'
          ? `127.0.0.1:${metricsB}`
          : all[i - 1] === '--events-address'
            ? '127.0.0.1:0'
            : arg,
      ),
    });
    agents = [replicaA, replicaB];
    await waitForReady(system.agentMetricsPort);
    const kymaOwner = async (name: string) =>
      (
        (await system.kcp.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
          group: GROUP,
          version: KINDS.kyma.version,
          namespace: system.namespace,
          plural: KINDS.kyma.plural,
          name,
        })) as { metadata: { labels?: Record<string, string> } }
      ).metadata.labels?.[LABELS.shardOwner];
    await waitFor(
      `${b} owns skr1 and ${a} skr2`,
      async () => (await kymaOwner('skr1')) === b && (await kymaOwner('skr2')) === a,
      Date.now() + 90_000,
    );
    await converged('the sharded replicas took over');
    await underFault(`forward to a dead owner (${b} killed -9)`, {
      begin: async () => {
        process.kill(replicaB.pid, 'SIGKILL');
        await replicaB.exited;
      },
      // A's forwards fail (503, the webhook retries) until B's Lease expires and A claims skr1.
      end: async () => {},
      streamInFaultMs: 2_000,
    });
    expect(await kymaOwner('skr1')).to.equal(a);
  });
});

/** `args` with `flag`'s value replaced. */
function withFlag(args: readonly string[], flag: string, value: string): string[] {
  return args.map((arg, i) => (args[i - 1] === flag ? value : arg));
}

async function waitForReady(metricsPort: number): Promise<void> {
  await waitFor(
    'skr-agent ready again',
    async () => (await fetch(`http://127.0.0.1:${metricsPort}/readyz`).catch(() => undefined))?.ok === true,
    Date.now() + 120_000,
  );
}
