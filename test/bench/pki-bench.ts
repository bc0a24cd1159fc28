// PKI benchmark: time to sign 1,000 SKR leaves (RSA 2048) with one CA, and to verify them all
// against a two-CA bundle (the shape during a rotation).
//
//   npx tsx --conditions=source test/bench/pki-bench.ts [--leaves 1000] [--ca-bits 4096]
//
// Key generation dominates issuance (OpenSSL through node:crypto; node-forge only builds the DER).
// Figures are printed; nothing here passes or fails.
import { generateKeyPairSync } from 'node:crypto';
import { cpus } from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import {
  addToBundle,
  createCa,
  issueLeaf,
  issueLeafAsync,
  verifyLeaf,
  type CertificateAndKey,
  type RsaKeyBits,
} from '@skr-watcher/pki';

const { values } = parseArgs({
  options: { leaves: { type: 'string', default: '1000' }, 'ca-bits': { type: 'string', default: '4096' } },
});
const count = Number(values.leaves);
const caBits = Number(values['ca-bits']) as RsaKeyBits;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

function report(label: string, totalMs: number, samples: number[]): void {
  const sorted = [...samples].sort((a, b) => a - b);
  console.log(
    `${label.padEnd(40)} total ${(totalMs / 1000).toFixed(2).padStart(7)} s   ` +
      `${(samples.length / (totalMs / 1000)).toFixed(1).padStart(7)}/s   ` +
      `p50 ${percentile(sorted, 50).toFixed(2)} ms   p99 ${percentile(sorted, 99).toFixed(2)} ms`,
  );
}

console.log(
  `node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? 'unknown'}), load shared with other work`,
);
const ca = createCa({ commonName: 'bench-ca', keyBits: caBits });
const otherCa = createCa({ commonName: 'bench-ca-next', keyBits: caBits });
const bundle = addToBundle(addToBundle('', otherCa.certPem), ca.certPem);

// Key generation alone, to show how much of issuance it is.
const keygenSamples: number[] = [];
const keygenCount = Math.min(count, 200);
const keygenStart = performance.now();
for (let i = 0; i < keygenCount; i++) {
  const t = performance.now();
  generateKeyPairSync('rsa', { modulusLength: 2048 });
  keygenSamples.push(performance.now() - t);
}
report(`RSA-2048 key generation (x${keygenCount})`, performance.now() - keygenStart, keygenSamples);

const leaves: CertificateAndKey[] = [];
const issueSamples: number[] = [];
const issueStart = performance.now();
for (let i = 0; i < count; i++) {
  const t = performance.now();
  leaves.push(
    issueLeaf({
      ca,
      runtimeId: `runtime-${i}`,
      dnsNames: [
        `skr-${i}.example.com`,
        'skr-webhook.kyma-system.svc',
        'skr-webhook.kyma-system.svc.cluster.local',
      ],
      keyBits: 2048,
    }),
  );
  issueSamples.push(performance.now() - t);
}
report(`issue ${count} leaves (CA RSA-${caBits})`, performance.now() - issueStart, issueSamples);

// The agent's path: keys generated on the libuv thread pool, 8 in flight (uses every core, event loop free).
const asyncSamples: number[] = [];
const asyncStart = performance.now();
let next = 0;
await Promise.all(
  Array.from({ length: 8 }, async () => {
    while (next < count) {
      const i = next++;
      const t = performance.now();
      await issueLeafAsync({
        ca,
        runtimeId: `runtime-${i}`,
        dnsNames: [`skr-${i}.example.com`],
        keyBits: 2048,
      });
      asyncSamples.push(performance.now() - t);
    }
  }),
);
report(`issue ${count} leaves async (8 in flight)`, performance.now() - asyncStart, asyncSamples);

const verifySamples: number[] = [];
let failures = 0;
const verifyStart = performance.now();
for (const leaf of leaves) {
  const t = performance.now();
  if (!verifyLeaf(leaf.certPem, bundle, { usages: ['serverAuth', 'clientAuth'] }).ok) failures++;
  verifySamples.push(performance.now() - t);
}
report(`verify ${count} leaves (2-CA bundle)`, performance.now() - verifyStart, verifySamples);
if (failures > 0) console.log(`!! ${failures} leaves did not verify`);
