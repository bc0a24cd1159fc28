// 10,000 random callback bodies over real mTLS: the listener never crashes, answers only the listed codes,
// and answers each one with the code the contract prescribes. The prescribed code comes from how each body
// was built (which fields were drawn from the valid or the invalid side, which mutation was applied), never
// from the contract's parser, so a parser that accepts or refuses the wrong thing is caught.
import { expect } from 'chai';
import fc from 'fast-check';
import { LIMITS } from '@skr-watcher/api';
import { startListener, type Listener } from '../src/listener/index.js';
import { createTestCa, issueListenerServingCert, issueTestLeaf } from './support/listener-certs.js';
import { sendCallback, tlsAgent, type CallbackAgent } from './support/listener-client.js';

const KYMA_A = { namespace: 'kcp-system', name: 'kyma-a' };
const RUNS = 10_000;
const CONCURRENCY = 8;
const LISTED_CODES = new Set([200, 400, 403, 413, 415]);
const JSON_TYPES = ['application/json', 'application/json; charset=utf-8'];

type Version = 'v1' | 'v2';

/** A body and the code it must get under each path version; `undefined`: any listed code will do. */
interface Built {
  kind: string;
  body: Buffer;
  expect: (version: Version) => number | undefined;
}

interface FuzzCase {
  kind: string;
  version: Version;
  body: Buffer;
  contentType: string;
  chunked: boolean;
  expected: number | undefined;
}

/** A value drawn with the knowledge of whether the listener's contract allows it. */
interface Drawn<T> {
  value: T;
  valid: boolean;
}
const drawn = <T>(valid: fc.Arbitrary<T>, invalid: fc.Arbitrary<T>): fc.Arbitrary<Drawn<T>> =>
  fc.oneof(
    { weight: 12, arbitrary: valid.map((value) => ({ value, valid: true })) },
    { weight: 1, arbitrary: invalid.map((value) => ({ value, valid: false })) },
  );

// Object names are DNS subdomains (≤ 253), namespaces DNS labels (≤ 63) or empty, groups DNS subdomains or
// empty, versions DNS labels, kinds start with a letter and hold letters and digits.
const name = drawn(
  fc.stringMatching(/^[a-z0-9]([-a-z0-9.]{0,30}[a-z0-9])?$/),
  fc.constantFrom('', 'Bad_Name', '-lead', 'trail.', 'a'.repeat(254), 'ünicode'),
);
const namespace = drawn(
  fc.constantFrom('', 'default', 'kyma-system', 'kcp-system', 'a'.repeat(63)),
  fc.constantFrom('Bad_NS', 'dotted.ns', 'a'.repeat(64), '-x'),
);
const group = drawn(
  fc.constantFrom('', 'operator.kyma-project.io', 'apps', 'keda.sh'),
  fc.constantFrom('UPPER.case', '.apps', 'under_score.io'),
);
const version = drawn(
  fc.constantFrom('v1', 'v1beta2', 'v1alpha1', 'v2', 'v1-alpha'),
  fc.constantFrom('', 'V1', 'v1.2'),
);
const kind = drawn(
  fc.constantFrom('Kyma', 'Sample', 'Deployment', 'Keda', 'K8s'),
  fc.constantFrom('9bad', '', 'Has-Dash'),
);
const objectKey = fc.record({ Namespace: namespace, Name: name });
const owner = fc.oneof(
  fc.constant({
    Namespace: { value: KYMA_A.namespace, valid: true },
    Name: { value: KYMA_A.name, valid: true },
  }),
  fc.constant({ Namespace: { value: 'kcp-system', valid: true }, Name: { value: 'kyma-b', valid: true } }),
  objectKey,
);

const valueOf = (key: { Namespace: Drawn<string>; Name: Drawn<string> }) => ({
  Namespace: key.Namespace.value,
  Name: key.Name.value,
});
const validKey = (key: { Namespace: Drawn<string>; Name: Drawn<string> }) =>
  key.Namespace.valid && key.Name.valid;

/** An event body as JSON text and the code each path version owes it. */
const events: fc.Arbitrary<{ text: string; expect: (version: Version) => number }> = fc
  .record(
    { owner, watched: objectKey, group, version, kind },
    { requiredKeys: ['watched', 'group', 'version', 'kind'] },
  )
  .map((drawnEvent) => {
    const { watched, group: g, version: v, kind: k } = drawnEvent;
    const body = {
      ...(drawnEvent.owner ? { owner: valueOf(drawnEvent.owner) } : {}),
      watched: valueOf(watched),
      watchedGvk: { group: g.value, version: v.value, kind: k.value },
    };
    const fieldsValid = validKey(watched) && g.valid && v.valid && k.valid;
    const ownedBy = drawnEvent.owner;
    return {
      text: JSON.stringify(body),
      expect: (path: Version) => {
        if (!fieldsValid) return 400;
        // v2 has no owner field: one sent along is ignored, like any unknown field.
        if (path === 'v2') return 200;
        if (!ownedBy || !validKey(ownedBy)) return 400;
        const named = valueOf(ownedBy);
        return named.Namespace === KYMA_A.namespace && named.Name === KYMA_A.name ? 200 : 403;
      },
    };
  });

/** JSON of no event: built without a `watched` key, so it cannot satisfy either contract. */
const noEvent = (text: string) => !text.includes('watched');

const bodies: fc.Arbitrary<Built> = fc.oneof(
  {
    weight: 4,
    arbitrary: events.map(({ text, expect }) => ({ kind: 'event', body: Buffer.from(text), expect })),
  },
  {
    // A JSON object cut anywhere before its closing brace is not JSON; cut at its end it is the event.
    weight: 3,
    arbitrary: fc.tuple(events, fc.double({ min: 0, max: 1, noNaN: true })).map(([event, cut]) => {
      const at = Math.floor(event.text.length * cut);
      return {
        kind: 'truncated',
        body: Buffer.from(event.text.slice(0, at)),
        expect: at === event.text.length ? event.expect : () => 400,
      };
    }),
  },
  {
    // One double quote replaced: the generated text holds no backslash, so an odd count of quotes is not JSON.
    weight: 1,
    arbitrary: fc
      .tuple(events, fc.nat(), fc.constantFrom('x', '#', ' ', '{', '\u00e9', '\u0001'))
      .map(([event, at, replacement]) => {
        const quotes = [...event.text.matchAll(/"/g)].map((match) => match.index);
        const index = quotes[at % quotes.length] ?? 0;
        const text = event.text.slice(0, index) + replacement + event.text.slice(index + 1);
        return { kind: 'unquoted', body: Buffer.from(text), expect: () => 400 };
      }),
  },
  {
    // A byte that never occurs in UTF-8 put anywhere: not UTF-8, so not a body the contract reads.
    weight: 1,
    arbitrary: fc
      .tuple(events, fc.nat(), fc.constantFrom(0xc0, 0xc1, 0xf5, 0xff, 0x80))
      .map(([event, at, byte]) => {
        const bytes = Buffer.from(event.text);
        const index = at % (bytes.length + 1);
        return {
          kind: 'not-utf8',
          body: Buffer.concat([bytes.subarray(0, index), Buffer.from([byte]), bytes.subarray(index)]),
          expect: () => 400,
        };
      }),
  },
  {
    // Random characters over a random spot: the outcome is unknown by construction; only the listed codes hold.
    weight: 1,
    arbitrary: fc
      .tuple(events, fc.nat(), fc.string({ unit: 'binary', minLength: 1, maxLength: 3 }))
      .map(([event, at, insert]) => {
        const index = at % (event.text.length + 1);
        const text = event.text.slice(0, index) + insert + event.text.slice(index + 1);
        return { kind: 'mutated', body: Buffer.from(text), expect: () => undefined };
      }),
  },
  {
    // Trailing whitespace is still JSON: over the limit it is 413, within it the event's own code. The limit is
    // in bytes, and drawn names may hold characters of several bytes each.
    weight: 2,
    arbitrary: fc.tuple(events, fc.integer({ min: -64, max: 48 * 1024 })).map(([event, extra]) => {
      const text = Buffer.from(event.text);
      const size = Math.max(text.length, LIMITS.eventBodyBytes + extra);
      return {
        kind: 'padded',
        body: Buffer.concat([text, Buffer.alloc(size - text.length, ' ')]),
        expect: size > LIMITS.eventBodyBytes ? () => 413 : event.expect,
      };
    }),
  },
  {
    weight: 1,
    arbitrary: fc
      .json({ maxDepth: 4 })
      .filter(noEvent)
      .map((text) => ({ kind: 'json', body: Buffer.from(text), expect: () => 400 })),
  },
  {
    weight: 1,
    arbitrary: fc
      .anything({ maxDepth: 3 })
      .map((value) => JSON.stringify(value) ?? 'undefined')
      .filter(noEvent)
      .map((text) => ({ kind: 'anything', body: Buffer.from(text), expect: () => 400 })),
  },
  {
    weight: 1,
    arbitrary: fc
      .string({ unit: 'grapheme', maxLength: 200 })
      .filter(noEvent)
      .map((text) => ({ kind: 'text', body: Buffer.from(text), expect: () => 400 })),
  },
  {
    weight: 1,
    arbitrary: fc
      .uint8Array({ maxLength: 300 })
      .map((bytes) => ({ kind: 'bytes', body: Buffer.from(bytes), expect: () => 400 })),
  },
  {
    // Opened and never closed: not JSON, and 413 once longer than the limit.
    weight: 1,
    arbitrary: fc
      .tuple(fc.integer({ min: 1, max: 20_000 }), fc.constantFrom('[', '{"a":'))
      .map(([depth, open]) => {
        const body = Buffer.from(open.repeat(Math.ceil(depth / open.length)));
        return { kind: 'nested', body, expect: () => (body.length > LIMITS.eventBodyBytes ? 413 : 400) };
      }),
  },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 1, max: 64 * 1024 }).map((size) => ({
      kind: 'oversize',
      body: Buffer.alloc(LIMITS.eventBodyBytes + size, 0x20),
      expect: () => 413,
    })),
  },
);

const cases: fc.Arbitrary<FuzzCase> = fc
  .record({
    built: bodies,
    version: fc.constantFrom<Version>('v1', 'v2'),
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
  .map(({ built, version, contentType, chunked }) => ({
    kind: built.kind,
    body: built.body,
    version,
    contentType,
    chunked,
    // The media type is judged before the body is read.
    expected: JSON_TYPES.includes(contentType) ? built.expect(version) : 415,
  }));

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
      // Thousands of bodies from one identity test the parser, not the per-SKR budget (listener-budget.test.ts).
      callbackBudget: false,
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
        const expected = fuzz.expected;
        const wellFormed = answer.json?.code === answer.status && typeof answer.json.reason === 'string';
        const prescribed = expected === undefined || answer.status === expected;
        if (!LISTED_CODES.has(answer.status) || !prescribed || !wellFormed) {
          mismatches.push(
            `${fuzz.kind} ${fuzz.version} ${fuzz.chunked ? 'chunked' : 'sized'} ${fuzz.body.length}B: got ${answer.status} want ${expected ?? 'a listed code'}: ${answer.text.slice(0, 160)} body=${JSON.stringify(fuzz.body.toString('latin1').slice(0, 120))}`,
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
