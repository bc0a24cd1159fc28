// Webhook memory under large reviews (a hostile SKR may send many at the limit): the built skr-webhook binary, as the Deployment runs
// it, takes rounds of N concurrent reviews of the maximum size; prints its RSS at rest and its peak, with the
// body budget as shipped and with it lifted (the "before"), to size the Deployment's memory limit.
//   npm run bench:webhook-memory [-- --concurrent 8 --rounds 5 --budgets default,unbounded] [--main <other build's
//   webhook/dist/main.js>, inside this tree so its imports resolve]
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request, Agent } from 'node:https';
import { loadavg } from 'node:os';
import { resolve as resolvePath } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { LIMITS } from '@skr-watcher/api';
import { freePort } from '@skr-watcher/testenv';
import { SecretVolume, secretFiles, testPki } from '../../webhook/test/support/certs.js';

const BUILT_MAIN = fileURLToPath(new URL('../../webhook/dist/main.js', import.meta.url));
const MiB = 1024 * 1024;

/** An UPDATE whose two objects fill the body limit (less a little for the envelope). */
function maxSizeReview(uid: string): Buffer {
  const half = Math.floor((LIMITS.admissionBodyBytes - 4096) / 2);
  const object = (replicas: number) => ({
    apiVersion: 'operator.kyma-project.io/v1alpha1',
    kind: 'Sample',
    metadata: { name: `big-${uid}`, namespace: 'kyma-system' },
    spec: { replicas, padding: 'x'.repeat(half - 200) },
  });
  return Buffer.from(
    JSON.stringify({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: {
        uid,
        kind: { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Sample' },
        resource: { group: 'operator.kyma-project.io', version: 'v1alpha1', resource: 'samples' },
        name: `big-${uid}`,
        namespace: 'kyma-system',
        operation: 'UPDATE',
        object: object(2),
        oldObject: object(1),
      },
    }),
  );
}

function rssBytes(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1];
  return Number(kib) * 1024;
}

function post(port: number, ca: string, agent: Agent, body: Buffer): Promise<number> {
  return new Promise((resolve) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/validate/lifecycle-manager',
        ca,
        agent,
        headers: { 'content-type': 'application/json', 'content-length': body.length },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', () => resolve(0));
    req.end(body);
  });
}

async function measure(
  label: string,
  budget: number | undefined,
  concurrent: number,
  rounds: number,
  main: string,
): Promise<void> {
  const pki = testPki('skr-webhook-memory-bench-ca');
  const volume = await SecretVolume.create(secretFiles(pki.leaf('skr-memory'), pki.ca.certPem));
  const [port, metricsPort] = [await freePort(), await freePort()];
  const child: ChildProcess = spawn(process.execPath, [main], {
    env: {
      PATH: process.env['PATH'] ?? '',
      WEBHOOK_PORT: String(port),
      METRICS_PORT: String(metricsPort),
      TLS_CERT: volume.path('tls.crt'),
      TLS_KEY: volume.path('tls.key'),
      CA_CERT: volume.path('ca.crt'),
      // Nothing needs delivering: relevance and queueing still run, the callbacks fail and back off.
      KCP_ADDR: '127.0.0.1:1',
      LOG_LEVEL: 'error',
      // Node flags to try (e.g. --max-semi-space-size=2), as a Deployment would set them.
      ...(process.env['WEBHOOK_NODE_OPTIONS'] ? { NODE_OPTIONS: process.env['WEBHOOK_NODE_OPTIONS'] } : {}),
      ...(budget === undefined ? {} : { MAX_BODY_BYTES_IN_FLIGHT: String(budget) }),
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const pid = child.pid as number;
  const agent = new Agent({ keepAlive: true, maxSockets: concurrent });
  try {
    const small = Buffer.from(JSON.stringify({ apiVersion: 'x' }));
    for (let waited = 0; (await post(port, pki.ca.certPem, agent, small)) !== 400; waited += 100) {
      if (waited > 30_000 || child.exitCode !== null) throw new Error('skr-webhook did not start');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const atRest = rssBytes(pid, 'VmRSS');
    const codes = new Map<number, number>();
    let sampledPeak = 0;
    const sampler = setInterval(() => (sampledPeak = Math.max(sampledPeak, rssBytes(pid, 'VmRSS'))), 10);
    const bodies = Array.from({ length: concurrent }, (_, i) => maxSizeReview(`r-${i}`));
    for (let round = 0; round < rounds; round++) {
      const answers = await Promise.all(bodies.map((body) => post(port, pki.ca.certPem, agent, body)));
      for (const code of answers) codes.set(code, (codes.get(code) ?? 0) + 1);
    }
    clearInterval(sampler);
    const peak = Math.max(sampledPeak, rssBytes(pid, 'VmHWM'));
    const answered = [...codes.entries()].map(([code, count]) => `${count}× ${code}`).join(', ');
    console.log(
      `${label.padEnd(44)} at rest ${(atRest / MiB).toFixed(0).padStart(4)} MiB   peak ${(peak / MiB).toFixed(0).padStart(4)} MiB   answers: ${answered}`,
    );
  } finally {
    agent.destroy();
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
    await volume.remove();
  }
}

const { values } = parseArgs({
  options: {
    concurrent: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '5' },
    budgets: { type: 'string', default: 'default,unbounded' },
    main: { type: 'string', default: BUILT_MAIN },
  },
});
const main = resolvePath(values.main ?? BUILT_MAIN);
const concurrent = Number(values.concurrent);
const rounds = Number(values.rounds);
console.log(
  `skr-webhook (${main}, node ${process.version}): ${rounds} rounds of ${concurrent} concurrent ` +
    `${(LIMITS.admissionBodyBytes / MiB).toFixed(0)} MiB UPDATE reviews; load average ${loadavg()
      .map((v) => v.toFixed(2))
      .join(' / ')}`,
);
for (const which of (values.budgets ?? '').split(',')) {
  if (which === 'default')
    await measure(
      `body budget ${(LIMITS.admissionBodyBytesInFlight / MiB).toFixed(0)} MiB (as shipped)`,
      undefined,
      concurrent,
      rounds,
      main,
    );
  else if (which === 'unbounded')
    await measure('body budget lifted (1 GiB: the old behaviour)', 1024 * MiB, concurrent, rounds, main);
  else await measure(`body budget ${which} bytes`, Number(which), concurrent, rounds, main);
}
