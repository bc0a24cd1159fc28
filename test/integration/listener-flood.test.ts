// One SKR cannot make the agent work for it. The skr-agent binary with its mTLS listener on real
// planes: SKR 1's certificate floods the listener with valid callbacks for 15 s; it gets 429 with Retry-After beyond
// its budget, its full reconciles are bounded by the per-Kyma interval, and SKR 2's callbacks keep being accepted and
// its edit reaches its ModuleConfig during the flood. Prints callbacks accepted/s, reconciles and the agent's CPU.
import { readFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { expect } from 'chai';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { CALLBACK_BUDGET } from '@skr-watcher/api';
import { sendCallback, v2Body } from '../../agent/test/support/listener-client.js';
import { waitUntil } from '../support/eventually.js';
import { SAMPLE_MODULE_CR } from '../support/kcp-seed.js';
import { startListeningAgent, type ListeningAgent } from '../support/listening-agent.js';

const FLOOD_SECONDS = 15;
/** Callbacks in flight at once from the flooding SKR. */
const FLOOD_CONNECTIONS = 8;

describe('skr-agent: one SKR cannot flood the listener', function () {
  this.timeout(300_000);
  let system: ListeningAgent;
  /** CPU seconds the agent process has used (user + system), from /proc. */
  const agentCpuSeconds = async (): Promise<number> => {
    const stat = await readFile(`/proc/${system.agent.child.pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  };

  before(async () => {
    system = await startListeningAgent('listener-flood', ['skr1', 'skr2']);
  });

  after(async () => {
    await system?.stop();
  });

  it("answers SKR 1's flood with 429, bounds its reconciles, and keeps serving SKR 2", async () => {
    // Let the start-up passes settle, so the reconciles counted are the flood's and SKR 2's.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const floodAgent = system.identity('skr1', { maxSockets: FLOOD_CONNECTIONS });
    const skr2Agent = system.identity('skr2');
    const statuses = new Map<number, number>();
    let retryAfterMissing = 0;
    const skr2Answers: number[] = [];
    const reconcilesBefore = await system.reconciles();
    const cpuBefore = await agentCpuSeconds();
    const startedAt = performance.now();
    const endAt = startedAt + FLOOD_SECONDS * 1000;
    let skr2Edited = false;
    try {
      const flood = Array.from({ length: FLOOD_CONNECTIONS }, async () => {
        while (performance.now() < endAt) {
          const answer = await sendCallback(system.listenerPort, floodAgent, { body: v2Body('sample') });
          statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
          if (answer.status === 429 && !answer.headers['retry-after']) retryAfterMissing++;
        }
      });
      // SKR 2, meanwhile: a callback a second, and one real edit whose callback must be mirrored during the flood.
      const skr2 = (async () => {
        while (performance.now() < endAt) {
          if (!skr2Edited && performance.now() > startedAt + 3_000) {
            skr2Edited = true;
            await system.env
              .plane('skr2')
              .kubeConfig()
              .makeApiClient(CustomObjectsApi)
              .patchNamespacedCustomObject({
                ...SAMPLE_MODULE_CR,
                body: [{ op: 'replace', path: '/spec/greeting', value: 'edited during the flood' }],
              });
          }
          skr2Answers.push(
            (await sendCallback(system.listenerPort, skr2Agent, { body: v2Body('sample') })).status,
          );
          await new Promise((resolve) => setTimeout(resolve, 1_000));
        }
      })();
      const mirroredDuringFlood = waitUntil(
        "SKR 2's edit reaches its ModuleConfig during the flood",
        async () =>
          (await system.moduleConfigOf('skr2'))?.spec.resource.spec?.['greeting'] ===
          'edited during the flood',
        FLOOD_SECONDS * 1000,
      ).then(
        () => performance.now() <= endAt,
        () => false,
      );
      await Promise.all([...flood, skr2]);
      const mirroredInTime = await mirroredDuringFlood;
      const seconds = (performance.now() - startedAt) / 1000;
      const cpu = (await agentCpuSeconds()) - cpuBefore;
      // Reconciles the flood's last wakes still start are counted too.
      await new Promise((resolve) => setTimeout(resolve, 2 * CALLBACK_BUDGET.fullReconcileIntervalMs));
      const reconciled = (await system.reconciles()) - reconcilesBefore;
      const accepted = statuses.get(200) ?? 0;
      console.log(
        `      flood from skr1 for ${seconds.toFixed(1)} s over ${FLOOD_CONNECTIONS} connections: answers ${JSON.stringify(Object.fromEntries(statuses))}; ` +
          `accepted ${(accepted / seconds).toFixed(1)}/s; reconciles (both Kymas) ${reconciled}; agent CPU ${cpu.toFixed(2)} s ` +
          `(${((100 * cpu) / seconds).toFixed(0)}% of a core); skr2 answers ${JSON.stringify(skr2Answers)}; load ${loadavg()
            .map((l) => l.toFixed(1))
            .join(' ')}`,
      );

      expect(statuses.get(429) ?? 0, 'callbacks over the budget are refused with 429').to.be.greaterThan(0);
      expect(retryAfterMissing, '429 answers without Retry-After').to.equal(0);
      expect(accepted, 'accepted: the burst and the rate over the flood, no more').to.be.at.most(
        CALLBACK_BUDGET.burst + Math.ceil(CALLBACK_BUDGET.perSecond * (seconds + 1)),
      );
      expect(skr2Answers.length).to.be.greaterThan(5);
      expect(new Set(skr2Answers), "SKR 2's callbacks are all accepted").to.deep.equal(new Set([200]));
      expect(mirroredInTime, "SKR 2's edit reached its ModuleConfig before the flood ended").to.equal(true);
      // SKR 1: a full reconcile per interval, plus the recheck of an unfingerprinted callback (one per second);
      // SKR 2: two per callback. Without the per-Kyma interval every accepted callback starts one.
      const perSecond = 2 * (1000 / CALLBACK_BUDGET.fullReconcileIntervalMs);
      expect(reconciled, 'full reconciles during the flood').to.be.at.most(
        Math.ceil(perSecond * (seconds + 2)) + 2 * skr2Answers.length + 10,
      );
    } finally {
      floodAgent.destroy();
      skr2Agent.destroy();
    }
  });
});
