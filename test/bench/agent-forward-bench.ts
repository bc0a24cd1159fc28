// Forwarded-callback latency (sharded replicas, decision 012): the extra time a callback accepted by a replica that does
// not own the Kyma spends reaching the owner. The owner's peer endpoint runs in a child process (its own event
// loop, as a real replica); this process forwards over one kept-alive mutual-TLS connection pool on loopback.
//
//   npx tsx --conditions=source test/bench/agent-forward-bench.ts [--events 5000] [--concurrency 1,8]
//
// Prints p50/p90/p99/max of the round trip (forward sent → owner's 202 received: the owner has enqueued the
// Kyma by then) per concurrency. Figures only; nothing passes or fails.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { AcceptedEvent } from '../../agent/src/listener/index.js';
import { createForwarder, startPeerServer } from '../../agent/src/sharding/index.js';
import { createTestCa, issueTestLeaf } from '../../agent/test/support/listener-certs.js';

function flag(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 && process.argv[at + 1] ? (process.argv[at + 1] as string) : fallback;
}

const EVENTS = Number(flag('events', '5000'));
const CONCURRENCY = flag('concurrency', '1,8').split(',').map(Number);

const event = (i: number): AcceptedEvent => ({
  runtimeId: `runtime-${i}`,
  kyma: { namespace: 'kcp-system', name: `kyma-${i}` },
  component: 'lifecycle-manager',
  contract: 'v2',
  watched: { namespace: 'kyma-system', name: 'sample' },
  gvk: { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Sample' },
  fingerprint: { uid: `uid-${i}`, generation: i, previousResourceVersion: String(1000 + i) },
  receivedAt: new Date(),
});

async function serve(): Promise<void> {
  const tls = JSON.parse(process.env['FORWARD_BENCH_TLS'] as string) as {
    certPem: string;
    keyPem: string;
    caBundlePem: string;
  };
  let delivered = 0;
  const server = await startPeerServer({
    host: '127.0.0.1',
    port: 0,
    tls,
    deliver: () => {
      delivered += 1;
      return 'accepted';
    },
  });
  process.send?.({ port: server.port });
  process.on('message', () => {
    process.send?.({ delivered });
    void server.close().then(() => process.exit(0));
  });
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;

async function main(): Promise<void> {
  const ca = createTestCa('bench-ca');
  const tls = { ...issueTestLeaf(ca, { commonName: 'skr-agent-listener' }), caBundlePem: ca.certPem };
  const owner = fork(fileURLToPath(import.meta.url), ['--serve'], {
    execArgv: ['--import', 'tsx', '--conditions=source'],
    env: { ...process.env, FORWARD_BENCH_TLS: JSON.stringify(tls) },
  });
  const port = await new Promise<number>((resolve) =>
    owner.once('message', (m) => resolve((m as { port: number }).port)),
  );
  const forwarder = createForwarder({ tls });
  const address = `127.0.0.1:${port}`;
  console.log(`owner's peer endpoint in a child process at ${address}; ${EVENTS} forwards per run`);
  // Warm-up at the highest concurrency: one TLS handshake per pooled connection, and JIT, out of the figures.
  const widest = Math.max(...CONCURRENCY);
  for (let round = 0; round < 50; round++) {
    await Promise.all(Array.from({ length: widest }, (_, i) => forwarder.forward(address, event(i))));
  }
  for (const concurrency of CONCURRENCY) {
    const samples: number[] = [];
    let next = 0;
    const started = Date.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < EVENTS) {
          const i = next++;
          const t0 = process.hrtime.bigint();
          await forwarder.forward(address, event(i));
          samples.push(Number(process.hrtime.bigint() - t0) / 1e6);
        }
      }),
    );
    const seconds = (Date.now() - started) / 1000;
    samples.sort((a, b) => a - b);
    console.log(
      `concurrency ${concurrency}: forwarded-event extra latency p50 ${percentile(samples, 50).toFixed(2)} ms, p90 ${percentile(
        samples,
        90,
      ).toFixed(2)} ms, p99 ${percentile(samples, 99).toFixed(2)} ms, max ${samples[
        samples.length - 1
      ]?.toFixed(2)} ms; ${Math.round(EVENTS / seconds)} forwards/s`,
    );
  }
  forwarder.close();
  owner.send('stop');
  const delivered = await new Promise<number>((resolve) =>
    owner.once('message', (m) => resolve((m as { delivered: number }).delivered)),
  );
  console.log(`owner received ${delivered} forwarded events`);
}

if (process.argv.includes('--serve')) {
  serve().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
} else {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
