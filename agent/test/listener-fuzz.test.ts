// 10,000 random callback bodies over real mTLS: the listener never crashes, answers only the listed codes,
// and answers each one with exactly the code the contract prescribes (an oracle built on packages/api).
import { expect } from 'chai';
import fc from 'fast-check';
import { LIMITS, parseWatchEvent } from '@skr-watcher/api';
import { startListener, type Listener } from '../src/listener/index.js';
import { createTestCa, issueListenerServingCert, issueTestLeaf } from './support/listener-certs.js';
import { sendCallback, tlsAgent, type CallbackAgent } from './support/listener-client.js';

const KYMA_A = { namespace: 'kcp-system', name: 'kyma-a' };
const RUNS = 10_000;
const CONCURRENCY = 8;
const LISTED_CODES = new Set([200, 400, 403, 413, 415]);

interface FuzzCase {
  kind: string;
  version: 'v1' | 'v2';
  body: Buffer;
  contentType: string;
  chunked: boolean;
}

const name = fc.stringMatching(/^[a-z0-9]([-a-z0-9.]{0,30}[a-z0-9])?$/);
const objectKey = fc.record({
  Namespace: fc.constantFrom('', 'default', 'kyma-system', 'kcp-system', 'Bad_NS'),
  Name: name,
});
const gvk = fc.record({
  group: fc.constantFrom('', 'operator.kyma-project.io', 'apps', 'keda.sh', 'UPPER.case'),
  version: fc.constantFrom('v1', 'v1beta2', 'v1alpha1', 'v2', ''),
  kind: fc.constantFrom('Kyma', 'Sample', 'Deployment', 'Keda', '9bad'),
});
const validEvent = fc.record(
  {
    owner: fc.oneof(
      fc.constant({ Namespace: KYMA_A.namespace, Name: KYMA_A.name }),
      fc.constant({ Namespace: 'kcp-system', Name: 'kyma-b' }),
      objectKey,
    ),
    watched: objectKey,
    watchedGvk: gvk,
  },
  { requiredKeys: ['watched', 'watchedGvk'] },
);
const serialized = validEvent.map((event) => JSON.stringify(event));

const bodies: fc.Arbitrary<{ kind: string; body: Buffer }> = fc.oneof(
  { weight: 4, arbitrary: serialized.map((text) => ({ kind: 'event', body: Buffer.from(text) })) },
  {
    weight: 3,
    arbitrary: fc.tuple(serialized, fc.double({ min: 0, max: 1, noNaN: true })).map(([text, cut]) => ({
      kind: 'truncated',
      body: Buffer.from(text.slice(0, Math.floor(text.length * cut))),
    })),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(serialized, fc.nat(), fc.string({ unit: 'binary', minLength: 1, maxLength: 3 }))
      .map(([text, at, insert]) => {
        const index = at % (text.length + 1);
        return { kind: 'mutated', body: Buffer.from(text.slice(0, index) + insert + text.slice(index + 1)) };
      }),
  },
  {
    weight: 2,
    arbitrary: fc.tuple(serialized, fc.integer({ min: -64, max: 48 * 1024 })).map(([text, extra]) => ({
      kind: 'padded',
      body: Buffer.from(text + ' '.repeat(Math.max(0, LIMITS.eventBodyBytes - text.length + extra))),
    })),
  },
  {
    weight: 1,
    arbitrary: fc.json({ maxDepth: 4 }).map((text) => ({ kind: 'json', body: Buffer.from(text) })),
  },
  {
    weight: 1,
    arbitrary: fc.anything({ maxDepth: 3 }).map((value) => ({
      kind: 'anything',
      body: Buffer.from(JSON.stringify(value) ?? 'undefined'),
    })),
  },
  {
    weight: 1,
    arbitrary: fc
      .string({ unit: 'grapheme', maxLength: 200 })
      .map((text) => ({ kind: 'text', body: Buffer.from(text) })),
  },
  {
    weight: 1,
    arbitrary: fc
      .uint8Array({ maxLength: 300 })
      .map((bytes) => ({ kind: 'bytes', body: Buffer.from(bytes) })),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.integer({ min: 1, max: 20_000 }), fc.constantFrom('[', '{"a":'))
      .map(([depth, open]) => ({
        kind: 'nested',
        body: Buffer.from(open.repeat(Math.ceil(depth / open.length))),
      })),
  },
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 1, max: 64 * 1024 })
      .map((size) => ({ kind: 'oversize', body: Buffer.alloc(LIMITS.eventBodyBytes + size, 0x20) })),
  },
);

const cases: fc.Arbitrary<FuzzCase> = fc
  .record({
    body: bodies,
    version: fc.constantFrom<'v1' | 'v2'>('v1', 'v2'),
    contentType: fc.oneof(
      { weight: 12, arbitrary: fc.constant('application/json') },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          'application/json; charset=utf-8',
          'text/plain',
          'application/xml',
          'application/jsonx',
        ),
      },
    ),
    chunked: fc.boolean(),
  })
  .map(({ body, version, contentType, chunked }) => ({
    kind: body.kind,
    body: body.body,
    version,
    contentType,
    chunked,
  }));

/** What DESIGN 4.3 prescribes for a case, worked out without the listener. */
function expectedCode(fuzz: FuzzCase): number {
  if (fuzz.contentType !== 'application/json' && fuzz.contentType !== 'application/json; charset=utf-8')
    return 415;
  if (fuzz.body.length > LIMITS.eventBodyBytes) return 413;
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(fuzz.body));
  } catch {
    return 400;
  }
  const event = parseWatchEvent(fuzz.version, json);
  if (!event.ok) return 400;
  if (fuzz.version === 'v1' && 'owner' in event.value) {
    const { owner } = event.value;
    if (owner.Namespace !== KYMA_A.namespace || owner.Name !== KYMA_A.name) return 403;
  }
  return 200;
}

describe('listener under random bodies', function () {
  this.timeout(300_000);
  let listener: Listener;
  let enqueued = 0;
  const agents: CallbackAgent[] = [];

  before(async function () {
    const ca = createTestCa('fuzz-ca');
    const serving = issueListenerServingCert(ca);
    const skrA = { ...issueTestLeaf(ca, { commonName: 'runtime-a' }), caPem: ca.certPem };
    for (let i = 0; i < CONCURRENCY; i++) agents.push(tlsAgent(skrA));
    listener = await startListener({
      host: '127.0.0.1',
      port: 0,
      mode: { kind: 'direct', ...serving, caBundlePem: ca.certPem },
      resolveKyma: (runtimeId) => (runtimeId === 'runtime-a' ? KYMA_A : undefined),
      enqueue: () => {
        enqueued++;
      },
    });
  });

  after(async function () {
    for (const agent of agents) agent.destroy();
    await listener?.close();
  });

  it(`answers ${RUNS.toLocaleString('en')} random bodies with the prescribed listed code and never crashes`, async function () {
    const seed = Number(process.env['FUZZ_SEED'] ?? Date.now() % 2 ** 31);
    const samples = fc.sample(cases, { numRuns: RUNS, seed });
    const byKind = new Map<string, Map<number, number>>();
    const mismatches: string[] = [];
    let accepted = 0;
    let next = 0;
    const worker = async (agent: CallbackAgent): Promise<void> => {
      while (next < samples.length) {
        const fuzz = samples[next++] as FuzzCase;
        const answer = await sendCallback(listener.port, agent, {
          path: `/${fuzz.version}/lifecycle-manager/event`,
          body: fuzz.body,
          chunked: fuzz.chunked,
          headers: { 'content-type': fuzz.contentType },
        });
        const counts = byKind.get(fuzz.kind) ?? new Map<number, number>();
        counts.set(answer.status, (counts.get(answer.status) ?? 0) + 1);
        byKind.set(fuzz.kind, counts);
        if (answer.status === 200) accepted++;
        const expected = expectedCode(fuzz);
        const wellFormed = answer.json?.code === answer.status && typeof answer.json.reason === 'string';
        if (!LISTED_CODES.has(answer.status) || answer.status !== expected || !wellFormed) {
          mismatches.push(
            `${fuzz.kind} ${fuzz.version} ${fuzz.chunked ? 'chunked' : 'sized'} ${fuzz.body.length}B: got ${answer.status} want ${expected}: ${answer.text.slice(0, 160)} body=${JSON.stringify(fuzz.body.toString('latin1').slice(0, 120))}`,
          );
        }
      }
    };
    await Promise.all(agents.map((agent) => worker(agent)));
    const summary = [...byKind].map(
      ([kind, counts]) => `${kind}: ${[...counts].map(([code, n]) => `${code}×${n}`).join(' ')}`,
    );
    expect(mismatches, `seed ${seed}\n${mismatches.slice(0, 10).join('\n')}`).to.have.length(0);
    expect(accepted, summary.join('\n')).to.be.greaterThan(RUNS / 50);
    expect(enqueued).to.equal(accepted);
    // Every code the contract lists for bodies actually occurred, so the generator reaches all of them.
    const seen = new Set([...byKind.values()].flatMap((counts) => [...counts.keys()]));
    expect([...seen].sort()).to.deep.equal([200, 400, 403, 413, 415]);
  });
});
