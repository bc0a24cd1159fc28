// Memory of the agent's SKR client against a hostile SKR (one SKR must not exhaust KCP's memory): a real TLS server answers every request
// with a huge JSON body, and the agent's four workers each ask it once at the same time. Each variant runs in a
// fresh process; the figure is the process's peak RSS over its baseline.
//
//   npx tsx --conditions=source test/bench/skr-memory-bench.ts [--body-mb 300] [--requests 4]
//
// "bounded" is an SKR client as the agent builds it (LIMITS.skrResponseBytes); "unbounded" is the same client
// without the bound, as it was before. Figures only; nothing passes or fails.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { LIMITS } from '@skr-watcher/api';
import { createClusterClient, kubeConfigFromYaml } from '@skr-watcher/kube';
import { hugeBody, startHostileSkr } from '../support/hostile-skr.js';

const { values } = parseArgs({
  options: {
    'body-mb': { type: 'string', default: '300' },
    requests: { type: 'string', default: '4' },
    variant: { type: 'string' },
  },
});
const BODY_BYTES = Number(values['body-mb']) * 1024 * 1024;
const REQUESTS = Number(values.requests);
const MiB = 1024 * 1024;

async function measure(bounded: boolean): Promise<void> {
  const body = hugeBody(BODY_BYTES);
  const hostile = await startHostileSkr(body.handler);
  const client = await createClusterClient(kubeConfigFromYaml(hostile.kubeconfig, 'hostile'), {
    timeoutMs: 300_000,
    ...(bounded ? { maxResponseBytes: LIMITS.skrResponseBytes } : {}),
  });
  global.gc?.();
  const baseline = process.memoryUsage().rss;
  let peak = baseline;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 10);
  const started = Date.now();
  const outcomes = await Promise.all(
    Array.from({ length: REQUESTS }, () =>
      client.core.listNamespace().then(
        () => 'read whole',
        (error: unknown) => (error as Error).name,
      ),
    ),
  );
  clearInterval(sampler);
  peak = Math.max(peak, process.memoryUsage().rss);
  await client.close();
  await hostile.close();
  console.log(
    `${bounded ? 'bounded  ' : 'unbounded'}  baseline ${Math.round(baseline / MiB)} MiB  peak ${Math.round(peak / MiB)} MiB  ` +
      `(+${Math.round((peak - baseline) / MiB)} MiB)  server sent ${Math.round(body.sent() / MiB)} MiB  ` +
      `${Date.now() - started} ms  outcome: ${[...new Set(outcomes)].join(', ')}`,
  );
}

if (values.variant) {
  await measure(values.variant === 'bounded');
} else {
  console.log(`${REQUESTS} concurrent requests, each answered with ${values['body-mb']} MB:`);
  for (const variant of ['unbounded', 'bounded']) {
    // A fresh process per variant, so one's garbage does not count against the other.
    const output = execFileSync(
      process.execPath,
      [
        '--expose-gc',
        '--import=tsx',
        '--conditions=source',
        fileURLToPath(import.meta.url),
        '--variant',
        variant,
        '--body-mb',
        String(values['body-mb']),
        '--requests',
        String(REQUESTS),
      ],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] },
    );
    process.stdout.write(output);
  }
}
