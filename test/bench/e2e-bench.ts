// End-to-end benchmark (DESIGN 5: p50 ≤ 150 ms, p99 ≤ 500 ms): Module CR edits in the SKRs reaching
// their ModuleConfigs in KCP over the real path (SKR API server → skr-webhook → mTLS listener → skr-agent →
// KCP API server), on the same local system as the demo (demo/system.ts).
//
//   npx tsx --conditions=source test/bench/e2e-bench.ts [--edits 200] [--rate 10] [--warmup 4] [--hung 20]
//
// --hung N adds N Kymas whose SKR accepts TLS and never answers (issue 10: a hung SKR must not stall the
// others); they are created and their reconciles under way before the measured edits start.
// Edits are paced open loop at --rate per second, alternating SKR 1 and SKR 2, each setting spec.greeting of
// the sample Module CR to a unique value. Latency: from the edit's write returning to this process seeing the
// ModuleConfig carry that value (a watch on KCP). When a later edit of the same SKR arrives first (the
// webhook and the work queue coalesce), the earlier edit counts as arrived then: KCP holds a newer state.
// Figures only; nothing passes or fails.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { SAMPLE_MODULE, startLocalSystem, type LocalSystem } from '../../demo/system.js';
import { neverAnswers, startHostileSkr, type HostileSkr } from '../support/hostile-skr.js';
import { seedKyma } from '../support/kcp-seed.js';

const { values } = parseArgs({
  options: {
    edits: { type: 'string', default: '200' },
    rate: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '4' },
    hung: { type: 'string', default: '0' },
  },
});
const HUNG = Number(values.hung);
const EDITS = Number(values.edits);
const RATE = Number(values.rate);
const WARMUP = Number(values.warmup);
const SETTLE_MS = 30_000;

interface Edit {
  index: number;
  skr: string;
  greeting: string;
  sentAtMs: number;
  writeReturnedAtMs?: number;
  arrivedAtMs?: number;
  /** A later edit of the same SKR reached KCP first. */
  superseded?: boolean;
  failed?: string;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] as number;
}

function summary(label: string, latencies: number[]): string {
  const sorted = [...latencies].sort((a, b) => a - b);
  const fmt = (ms: number) => `${Math.round(ms)} ms`.padStart(8);
  return `${label.padEnd(8)} n=${String(sorted.length).padStart(4)}  p50 ${fmt(percentile(sorted, 50))}  p99 ${fmt(percentile(sorted, 99))}  max ${fmt(sorted.at(-1) ?? Number.NaN)}`;
}

type Samples = Map<string, number>;

async function scrape(port: number): Promise<Samples> {
  const samples: Samples = new Map();
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    samples.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return samples;
}

const sumOf = (samples: Samples, prefix: string) =>
  [...samples].filter(([key]) => key.startsWith(prefix)).reduce((sum, [, value]) => sum + value, 0);

/** Runs `edits` paced at `rate`/s; resolves when every edit arrived in KCP or `SETTLE_MS` after the last. */
async function runEdits(system: LocalSystem, edits: Edit[]): Promise<void> {
  const apis = new Map(
    system.skrs.map((skr) => [skr.name, skr.kubeConfig().makeApiClient(CustomObjectsApi)] as const),
  );
  const pending = new Map<string, Edit[]>(system.skrs.map((skr) => [skr.name, []]));
  let settled: () => void = () => {};
  const allArrived = new Promise<void>((resolve) => (settled = resolve));
  const check = () => {
    if (edits.every((edit) => edit.arrivedAtMs !== undefined || edit.failed)) settled();
  };
  const unsubscribe = system.moduleConfigs.subscribe((mirror) => {
    const queue = pending.get(mirror.kyma);
    const at = queue?.findIndex((edit) => edit.greeting === mirror.spec['greeting']) ?? -1;
    if (!queue || at < 0) return;
    // Everything up to the arrived edit is now reflected in KCP (edits of one SKR apply in order).
    const reached = queue[at];
    for (const edit of queue.splice(0, at + 1)) {
      edit.arrivedAtMs = mirror.seenAtMs;
      edit.superseded = edit !== reached;
    }
    check();
  });
  const start = Date.now() + 100;
  const sends = edits.map(async (edit, i) => {
    const due = start + (i * 1000) / RATE;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - Date.now())));
    pending.get(edit.skr)?.push(edit);
    edit.sentAtMs = Date.now();
    try {
      await apis.get(edit.skr)?.patchNamespacedCustomObject({
        ...SAMPLE_MODULE,
        body: [{ op: 'replace', path: '/spec/greeting', value: edit.greeting }],
      });
      edit.writeReturnedAtMs = Date.now();
    } catch (error) {
      edit.failed = error instanceof Error ? error.message : String(error);
      const queue = pending.get(edit.skr);
      queue?.splice(queue.indexOf(edit), 1);
    }
  });
  await Promise.all(sends);
  check();
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([allArrived, new Promise((resolve) => (timer = setTimeout(resolve, SETTLE_MS)))]);
  clearTimeout(timer);
  unsubscribe();
}

function editsFor(system: LocalSystem, count: number, prefix: string): Edit[] {
  return Array.from({ length: count }, (_, index) => {
    const skr = system.skrs[index % system.skrs.length]?.name as string;
    return { index, skr, greeting: `${prefix}-${index}-${Date.now()}`, sentAtMs: 0 };
  });
}

async function main(): Promise<void> {
  const parent = await mkdtemp(join(tmpdir(), 'e2e-bench-'));
  const t0 = Date.now();
  const system = await startLocalSystem({
    dir: join(parent, 'system'),
    progress: (line) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(5)} s] ${line}`),
  });
  let hung: HostileSkr | undefined;
  try {
    if (HUNG > 0) {
      hung = await startHostileSkr(neverAnswers);
      for (let i = 0; i < HUNG; i++)
        await seedKyma(system.kcp, system.namespace, `hung-${i}`, hung.kubeconfig);
      const since = Date.now();
      while (hung.pending() < Math.min(HUNG, 4) && Date.now() - since < 60_000)
        await new Promise((resolve) => setTimeout(resolve, 100));
      console.log(`${HUNG} Kymas with a hung SKR added; ${hung.pending()} of their requests hanging`);
    }
    console.log(`system up in ${Date.now() - t0} ms; warm-up: ${WARMUP} edits`);
    await runEdits(system, editsFor(system, WARMUP, 'warmup'));
    const before = await Promise.all(system.skrs.map((skr) => scrape(skr.webhookMetricsPort)));
    const agentBefore = await scrape(system.agentMetricsPort);

    console.log(
      `measuring: ${EDITS} edits at ${RATE}/s, alternating ${system.skrs.map((s) => s.name).join(' and ')}`,
    );
    const edits = editsFor(system, EDITS, 'bench');
    await runEdits(system, edits);

    const after = await Promise.all(system.skrs.map((skr) => scrape(skr.webhookMetricsPort)));
    const agentAfter = await scrape(system.agentMetricsPort);
    const latencyOf = (edit: Edit) => (edit.arrivedAtMs as number) - (edit.writeReturnedAtMs as number);
    const arrived = edits.filter((e) => e.arrivedAtMs !== undefined && e.writeReturnedAtMs !== undefined);
    console.log('\nEdit write returned → ModuleConfig shows the edit (watch on KCP):');
    for (const skr of system.skrs) {
      console.log(summary(skr.name, arrived.filter((e) => e.skr === skr.name).map(latencyOf)));
    }
    const overall = arrived.map(latencyOf).sort((a, b) => a - b);
    console.log(summary('overall', overall));
    const writes = edits
      .filter((e) => e.writeReturnedAtMs !== undefined)
      .map((e) => (e.writeReturnedAtMs as number) - e.sentAtMs);
    console.log(summary('writes', writes), ' (edit sent → write returned, admission included)');
    const p50 = percentile(overall, 50);
    const p99 = percentile(overall, 99);
    console.log(
      `\nDESIGN 5 bar: p50 ≤ 150 ms (${Math.round(p50)} ms: ${p50 <= 150 ? 'met' : 'NOT met'}), ` +
        `p99 ≤ 500 ms (${Math.round(p99)} ms: ${p99 <= 500 ? 'met' : 'NOT met'})`,
    );
    const superseded = edits.filter((e) => e.superseded).length;
    const lost = edits.filter((e) => e.arrivedAtMs === undefined && !e.failed).length;
    const failed = edits.filter((e) => e.failed);
    console.log(
      `edits: ${EDITS}; arrived ${arrived.length} (of which ${superseded} superseded by a later edit of the same SKR first); ` +
        `not arrived within ${SETTLE_MS / 1000} s: ${lost}; failed writes: ${failed.length}${failed[0] ? ` (first: ${failed[0].failed})` : ''}`,
    );
    system.skrs.forEach((skr, i) => {
      const delta = (prefix: string) =>
        sumOf(after[i] as Samples, prefix) - sumOf(before[i] as Samples, prefix);
      console.log(
        `${skr.name} webhook: admissions ${delta('skr_webhook_admission_requests_total')}, events enqueued ${delta('skr_webhook_events_enqueued_total')}, ` +
          `coalesced ${delta('skr_webhook_events_coalesced_total')}, delivered ${delta('skr_webhook_events_delivered_total')}, ` +
          `dropped ${delta('skr_webhook_events_dropped_total')}`,
      );
    });
    // Per labelled series: triggers by source, reconciles by result.
    const agentSeries = [...agentAfter.keys()]
      .filter((key) => /^skr_agent_(triggers|reconcile)_total\{/.test(key))
      .map((key) => [key, (agentAfter.get(key) ?? 0) - (agentBefore.get(key) ?? 0)] as const)
      .filter(([, delta]) => delta > 0)
      .map(([key, delta]) => `${key} +${delta}`);
    console.log(`agent during the run: ${agentSeries.join(', ') || 'nothing'}`);
    if (hung)
      console.log(`hung SKR: ${hung.requests()} requests received, ${hung.pending()} hanging at the end`);
  } finally {
    await hung?.close();
    await system.stop();
    await rm(parent, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
