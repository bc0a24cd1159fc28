// The dispatcher with an injected clock and a scripted KCP: coalescing, backoff, max age, bounds, drain.
import { expect } from 'chai';
import fc from 'fast-check';
import { RESYNC_EVENT, type WatchEventV2 } from '@skr-watcher/api';
import { createLogger, silentLogger } from '@skr-watcher/telemetry';
import { backoffDelay } from '@skr-watcher/api';
import { dispatchKey, Dispatcher, type DeliveryOutcome } from '../src/dispatch/index.js';
import { ManualClock, settle } from '../../test/support/manual-clock.js';

function event(name: string, kind = 'Sample'): WatchEventV2 {
  return {
    watched: { Namespace: 'kyma-system', Name: name },
    watchedGvk: { group: 'operator.kyma-project.io', version: 'v1alpha1', kind },
  };
}

/** A KCP whose answers the test scripts; each call waits until the test releases it. */
class ScriptedKcp {
  readonly calls: { manager: string; event: WatchEventV2; at: number }[] = [];
  private pending: ((outcome: DeliveryOutcome) => void)[] = [];
  /** When set, every call is answered at once with this outcome. */
  auto: DeliveryOutcome | undefined;

  constructor(private readonly clock: ManualClock) {}

  send = (manager: string, sent: WatchEventV2): Promise<DeliveryOutcome> => {
    this.calls.push({ manager, event: sent, at: this.clock.now() });
    if (this.auto) return Promise.resolve(this.auto);
    return new Promise((resolve) => this.pending.push(resolve));
  };

  get inFlight(): number {
    return this.pending.length;
  }

  async answer(outcome: DeliveryOutcome): Promise<void> {
    const next = this.pending.shift();
    if (!next) throw new Error('no callback in flight to answer');
    next(outcome);
    await settle();
  }
}

const DELIVERED: DeliveryOutcome = { result: 'delivered', status: 200 };
const UNAVAILABLE: DeliveryOutcome = { result: 'retry', reason: 'HTTP 503', status: 503 };

function setup(overrides: Partial<ConstructorParameters<typeof Dispatcher>[0]> = {}) {
  const clock = new ManualClock();
  const kcp = new ScriptedKcp(clock);
  const dispatcher = new Dispatcher({
    send: kcp.send,
    workers: 2,
    maxQueue: 100,
    backoffInitialMs: 100,
    backoffMaxMs: 1_000,
    maxAgeMs: 60_000,
    logger: silentLogger(),
    clock,
    random: () => 0.5,
    ...overrides,
  });
  return { clock, kcp, dispatcher };
}

describe('Dispatcher', () => {
  it('sends an enqueued event at once and forgets it once KCP answers 2xx', async () => {
    const { kcp, dispatcher } = setup();
    expect(dispatcher.enqueue('lifecycle-manager', event('a'))).to.equal('enqueued');
    await settle();
    expect(kcp.calls).to.have.length(1);
    expect(kcp.calls[0]).to.deep.include({ manager: 'lifecycle-manager', event: event('a') });
    expect(dispatcher.depth).to.equal(1);
    await kcp.answer(DELIVERED);
    expect(dispatcher.depth).to.equal(0);
    expect(dispatcher.stats.delivered).to.equal(1);
  });

  it('coalesces repeats for one object that wait behind busy workers into one callback', async () => {
    const { kcp, dispatcher } = setup({ workers: 1 });
    dispatcher.enqueue('m', event('busy'));
    await settle();
    for (let i = 0; i < 5; i++) dispatcher.enqueue('m', event('x'));
    expect(dispatcher.stats).to.deep.include({ enqueued: 2, coalesced: 4 });
    await kcp.answer(DELIVERED);
    await kcp.answer(DELIVERED);
    expect(kcp.calls.map((c) => c.event.watched.Name)).to.deep.equal(['busy', 'x']);
    expect(dispatcher.depth).to.equal(0);
  });

  it('keys by manager, kind, namespace and name: different objects are not coalesced', () => {
    const keys = new Set([
      dispatchKey('m', event('a')),
      dispatchKey('other', event('a')),
      dispatchKey('m', event('a', 'Kyma')),
      dispatchKey('m', { ...event('a'), watched: { Namespace: 'ns2', Name: 'a' } }),
    ]);
    expect(keys.size).to.equal(4);
  });

  it('sends once more when the object changed while its callback was in flight', async () => {
    const { kcp, dispatcher } = setup();
    dispatcher.enqueue('m', event('a'));
    await settle();
    expect(dispatcher.enqueue('m', event('a'))).to.equal('coalesced');
    await kcp.answer(DELIVERED);
    expect(kcp.calls).to.have.length(2);
    await kcp.answer(DELIVERED);
    expect(dispatcher.depth).to.equal(0);
    expect(dispatcher.stats.delivered).to.equal(2);
  });

  it('an object changed during its send goes again only minGapMs after that send started, with its latest change', async () => {
    const { clock, kcp, dispatcher } = setup({ minGapMs: 50 });
    dispatcher.enqueue('m', event('hot'));
    await settle();
    await clock.advance(5);
    // A controller rewriting the object: every change while the send is out coalesces into one entry.
    for (let i = 0; i < 20; i++) dispatcher.enqueue('m', event('hot'), `uid-${i}`);
    await kcp.answer(DELIVERED);
    expect(kcp.calls).to.have.length(1);
    await clock.advance(44);
    expect(kcp.calls).to.have.length(1);
    await clock.advance(1);
    expect(kcp.calls.map((call) => call.at)).to.deep.equal([0, 50]);
    await kcp.answer(DELIVERED);
    expect(dispatcher.depth).to.equal(0);
    // Another object is not held by this one's gap, and a change after a quiet moment goes at once.
    dispatcher.enqueue('m', event('other'));
    await settle();
    await kcp.answer(DELIVERED);
    await clock.advance(200);
    dispatcher.enqueue('m', event('hot'));
    await settle();
    expect(kcp.calls.map((call) => `${call.event.watched.Name}@${call.at}`)).to.deep.equal([
      'hot@0',
      'hot@50',
      'other@50',
      'hot@250',
    ]);
  });

  it('retries 5xx with capped exponential backoff and jitter, then delivers', async () => {
    const { clock, kcp, dispatcher } = setup({ random: () => 0.5 });
    dispatcher.enqueue('m', event('a'));
    await settle();
    // Attempt n waits ceiling/2 + 0.5*ceiling/2 = 0.75*min(1000, 100*2^(n-1)).
    const expectedGaps = [75, 150, 300, 600, 750, 750];
    for (const gap of expectedGaps) {
      await kcp.answer(UNAVAILABLE);
      await clock.advance(gap - 1);
      expect(kcp.inFlight, `nothing sent 1 ms before the ${gap} ms backoff ends`).to.equal(0);
      await clock.advance(1);
      expect(kcp.inFlight).to.equal(1);
    }
    await kcp.answer(DELIVERED);
    const gaps = kcp.calls.slice(1).map((c, i) => c.at - (kcp.calls[i]?.at ?? 0));
    expect(gaps).to.deep.equal(expectedGaps);
    expect(dispatcher.depth).to.equal(0);
  });

  it('jitter stays within [ceiling/2, ceiling] and the ceiling is capped', () => {
    for (let attempt = 1; attempt < 40; attempt++) {
      const ceiling = Math.min(1000, 100 * 2 ** (attempt - 1));
      expect(backoffDelay(attempt, 100, 1000, () => 0)).to.equal(ceiling / 2);
      expect(backoffDelay(attempt, 100, 1000, () => 0.999999)).to.be.within(ceiling / 2, ceiling);
    }
  });

  it('treats other 4xx as final: no retry, counted as rejected', async () => {
    const { clock, kcp, dispatcher } = setup();
    dispatcher.enqueue('m', event('a'));
    await settle();
    await kcp.answer({ result: 'rejected', reason: 'HTTP 403', status: 403 });
    await clock.advance(10_000);
    expect(kcp.calls).to.have.length(1);
    expect(dispatcher.stats.dropped.rejected).to.equal(1);
    expect(dispatcher.depth).to.equal(0);
  });

  it('a send that throws is retried like a network error', async () => {
    const { clock, dispatcher } = setup();
    let calls = 0;
    const flaky = new Dispatcher({
      send: () => (++calls === 1 ? Promise.reject(new Error('ECONNRESET')) : Promise.resolve(DELIVERED)),
      workers: 1,
      maxQueue: 10,
      backoffInitialMs: 100,
      backoffMaxMs: 1000,
      maxAgeMs: 60_000,
      logger: silentLogger(),
      clock,
    });
    flaky.enqueue('m', event('a'));
    await clock.advance(100);
    expect(calls).to.equal(2);
    expect(flaky.stats.delivered).to.equal(1);
    expect(dispatcher.depth).to.equal(0);
  });

  it('drops an event it could not deliver within its max age, counting the reason, and asks for a resync instead', async () => {
    const { clock, kcp, dispatcher } = setup({ maxAgeMs: 2_000 });
    kcp.auto = UNAVAILABLE;
    dispatcher.enqueue('m', event('a'));
    await clock.advance(5_000);
    expect(dispatcher.stats.dropped.max_age).to.equal(1);
    const sentA = kcp.calls.filter((c) => c.event.watched.Name === 'a').map((c) => c.at);
    expect(Math.max(...sentA)).to.be.at.most(2_000);
    // What KCP never heard of is covered by one "look at everything" callback, kept past the max age until taken.
    expect(dispatcher.depth).to.equal(0);
    expect(dispatcher.resyncsPending).to.equal(1);
    await clock.advance(10_000);
    const resyncs = kcp.calls.filter((c) => c.event === RESYNC_EVENT);
    expect(resyncs.length).to.be.greaterThan(2);
    expect(resyncs.every((c) => c.manager === 'm')).to.equal(true);
    expect(Math.max(...resyncs.map((c) => c.at))).to.be.greaterThan(10_000);
    kcp.auto = DELIVERED;
    await clock.advance(1_000);
    expect(dispatcher.resyncsPending).to.equal(0);
    expect(dispatcher.stats.delivered, 'a resync is not a change delivered').to.equal(0);
    expect(clock.pendingTimers).to.equal(0);
  });

  it('after queue_full drops sends one resync per manager, outside the queue bound, once a place is free or not', async () => {
    const { kcp, dispatcher } = setup({ maxQueue: 2, workers: 4 });
    dispatcher.enqueue('m', event('a'));
    dispatcher.enqueue('m', event('b'));
    expect(dispatcher.enqueue('m', event('c'))).to.equal('dropped');
    expect(dispatcher.enqueue('m', event('d'))).to.equal('dropped');
    expect(dispatcher.enqueue('other', event('e'))).to.equal('dropped');
    await settle();
    const sent = kcp.calls.map((c) => `${c.manager}:${c.event.watched.Name}`);
    expect(sent.sort()).to.deep.equal(['m:a', 'm:b', 'm:skr-webhook', 'other:skr-webhook']);
    expect([dispatcher.depth, dispatcher.resyncsPending]).to.deep.equal([2, 2]);
    for (let i = 0; i < 4; i++) await kcp.answer(DELIVERED);
    expect([dispatcher.depth, dispatcher.resyncsPending]).to.deep.equal([0, 0]);
    expect(dispatcher.stats.delivered).to.equal(2);
  });

  it('resync() while one is in flight sends it once more afterwards; one entry per manager', async () => {
    const { kcp, dispatcher } = setup({ workers: 2 });
    dispatcher.resync('m', 'test');
    await settle();
    dispatcher.resync('m', 'test');
    dispatcher.resync('m', 'test');
    await settle();
    expect(kcp.inFlight).to.equal(1);
    await kcp.answer(DELIVERED);
    expect(kcp.inFlight, 'sent again: the first read may have missed what made us ask').to.equal(1);
    await kcp.answer(DELIVERED);
    expect(kcp.calls).to.have.length(2);
    expect(dispatcher.resyncsPending).to.equal(0);
  });

  it("honours KCP's Retry-After as the delay of the next attempt, and a 503 with it does not open the breaker", async () => {
    const { clock, kcp, dispatcher } = setup({ workers: 1, backoffInitialMs: 100, backoffMaxMs: 10_000 });
    const busy: DeliveryOutcome = { result: 'retry', reason: 'HTTP 503', status: 503, retryAfterMs: 3_000 };
    dispatcher.enqueue('m', event('a'));
    await settle();
    for (let i = 0; i < 4; i++) {
      await kcp.answer(busy);
      await clock.advance(2_900);
      expect(kcp.inFlight, `attempt ${i + 2} not before Retry-After`).to.equal(0);
      await clock.advance(200);
      expect(kcp.inFlight).to.equal(1);
    }
    expect(dispatcher.breakerState).to.equal('closed');
    await kcp.answer(DELIVERED);
    expect(dispatcher.depth).to.equal(0);
  });

  it('a new change refreshes the age of a backing-off event', async () => {
    const { clock, kcp, dispatcher } = setup({ maxAgeMs: 2_000 });
    kcp.auto = UNAVAILABLE;
    dispatcher.enqueue('m', event('a'));
    await clock.advance(1_500);
    dispatcher.enqueue('m', event('a'));
    await clock.advance(1_000);
    expect(dispatcher.depth, 'still retrying 2.5 s after the first change').to.equal(1);
    kcp.auto = DELIVERED;
    await clock.advance(1_000);
    expect(dispatcher.stats.delivered).to.equal(1);
    expect(dispatcher.stats.dropped.max_age).to.equal(0);
  });

  it('is bounded: distinct objects beyond the queue size are dropped as queue_full', async () => {
    const { kcp, dispatcher } = setup({ maxQueue: 3, workers: 1 });
    const results = ['a', 'b', 'c', 'd'].map((name) => dispatcher.enqueue('m', event(name)));
    expect(results).to.deep.equal(['enqueued', 'enqueued', 'enqueued', 'dropped']);
    expect(dispatcher.enqueue('m', event('b'))).to.equal('coalesced');
    expect(dispatcher.stats.dropped.queue_full).to.equal(1);
    await settle();
    expect(kcp.inFlight).to.equal(1);
  });

  it('validates only events that need a new entry, and drops invalid ones as invalid', async () => {
    let validated = 0;
    const { kcp, dispatcher } = setup({
      workers: 1,
      validate: (e) => (validated++, e.watched.Name.startsWith('bad') ? 'bad name' : undefined),
    });
    dispatcher.enqueue('m', event('busy'));
    dispatcher.enqueue('m', event('x'));
    dispatcher.enqueue('m', event('x'));
    dispatcher.enqueue('m', event('x'));
    expect(validated, 'repeats of a queued object are not validated again').to.equal(2);
    expect(dispatcher.enqueue('m', event('bad-one'))).to.equal('dropped');
    expect(dispatcher.stats.dropped.invalid).to.equal(1);
    await settle();
    expect(kcp.calls.map((c) => c.event.watched.Name)).to.deep.equal(['busy']);
  });

  it('never runs more callbacks at once than it has workers', async () => {
    const { kcp, dispatcher } = setup({ workers: 3 });
    for (let i = 0; i < 10; i++) dispatcher.enqueue('m', event(`o${i}`));
    await settle();
    expect(kcp.inFlight).to.equal(3);
    for (let i = 0; i < 10; i++) {
      expect(kcp.inFlight).to.be.at.most(3);
      await kcp.answer(DELIVERED);
    }
    expect(kcp.calls).to.have.length(10);
  });

  it('drain delivers what is queued, including retries, then stops taking events', async () => {
    const { clock, kcp, dispatcher } = setup();
    dispatcher.enqueue('m', event('a'));
    await settle();
    await kcp.answer(UNAVAILABLE);
    kcp.auto = DELIVERED;
    let drained = false;
    const draining = dispatcher.drain(5_000).then(() => (drained = true));
    expect(dispatcher.enqueue('m', event('late'))).to.equal('dropped');
    await clock.advance(200);
    await draining;
    expect(drained).to.equal(true);
    expect(dispatcher.stats.delivered).to.equal(1);
    expect(dispatcher.stats.dropped.shutdown).to.equal(1);
  });

  it('drain gives up after its timeout and counts what is left as shutdown drops', async () => {
    const { clock, kcp, dispatcher } = setup();
    kcp.auto = UNAVAILABLE;
    dispatcher.enqueue('m', event('a'));
    dispatcher.enqueue('m', event('b'));
    const draining = dispatcher.drain(1_000);
    await clock.advance(1_000);
    await draining;
    expect(dispatcher.depth).to.equal(0);
    expect(dispatcher.stats.dropped.shutdown).to.equal(2);
    expect(clock.pendingTimers).to.equal(0);
  });

  it('a shutdown that drops 2,000 events writes a few warn lines that count the rest, not 2,000', async () => {
    const lines: { msg: string; suppressed?: number; name?: string }[] = [];
    const logger = createLogger('test', 'warn', {
      write: (line: string) => void lines.push(JSON.parse(line)),
    });
    const { clock, kcp, dispatcher } = setup({ logger, maxQueue: 5_000 });
    kcp.auto = UNAVAILABLE;
    for (let i = 0; i < 2_000; i++) dispatcher.enqueue('m', event(`obj-${i}`));
    const draining = dispatcher.drain(1_000);
    await clock.advance(1_000);
    await draining;
    expect(dispatcher.stats.dropped.shutdown).to.equal(2_000);
    const shutdownLines = lines.filter((line) => line.msg.startsWith('event dropped: shutdown'));
    expect(shutdownLines.length).to.be.within(1, 3);
    // Every drop is accounted for: a line per drop written, plus the counts of those left out.
    const accounted = shutdownLines.reduce(
      (sum, line) => sum + (line.msg === 'event dropped: shutdown' ? 1 : 0) + (line.suppressed ?? 0),
      0,
    );
    expect(accounted).to.equal(2_000);
    expect(shutdownLines.at(-1)?.name).to.equal('obj-1999');
  });
});

describe('Dispatcher properties', () => {
  it('never loses a change: every enqueue is followed by a delivered send of its object that started after it', async () => {
    const step = fc.record({
      key: fc.constantFrom('a', 'b', 'c', 'd'),
      gapMs: fc.integer({ min: 0, max: 300 }),
    });
    const answer = fc.record({ delayMs: fc.integer({ min: 0, max: 200 }), fails: fc.boolean() });
    await fc.assert(
      fc.asyncProperty(
        fc.array(step, { minLength: 1, maxLength: 40 }),
        fc.array(answer, { minLength: 1, maxLength: 20 }),
        fc.integer({ min: 1, max: 3 }),
        async (steps, answers, workers) => {
          const clock = new ManualClock();
          const sends: { name: string; startedAt: number; delivered: boolean }[] = [];
          let inFlight = 0;
          let maxInFlight = 0;
          let call = 0;
          const dispatcher = new Dispatcher({
            send: (_manager, sent) => {
              const script = answers[call++ % answers.length] as { delayMs: number; fails: boolean };
              // Every third call succeeds whatever the script says, so delivery always ends.
              const fails = script.fails && call % 3 !== 0;
              const record = { name: sent.watched.Name, startedAt: clock.now(), delivered: false };
              sends.push(record);
              maxInFlight = Math.max(maxInFlight, ++inFlight);
              return new Promise<DeliveryOutcome>((resolve) => {
                clock.setTimeout(() => {
                  inFlight--;
                  record.delivered = !fails;
                  resolve(fails ? UNAVAILABLE : DELIVERED);
                }, script.delayMs);
              });
            },
            workers,
            maxQueue: 100,
            backoffInitialMs: 10,
            backoffMaxMs: 100,
            maxAgeMs: 3_600_000,
            logger: silentLogger(),
            clock,
            random: () => 0.5,
          });
          const changes: { name: string; at: number }[] = [];
          for (const s of steps) {
            await clock.advance(s.gapMs);
            changes.push({ name: s.key, at: clock.now() });
            dispatcher.enqueue('m', event(s.key));
          }
          await clock.advance(600_000);
          expect(dispatcher.depth).to.equal(0);
          expect(maxInFlight).to.be.at.most(workers);
          for (const change of changes) {
            const covered = sends.some(
              (s) => s.name === change.name && s.delivered && s.startedAt >= change.at,
            );
            expect(
              covered,
              `change of ${change.name} at ${change.at} ms has a delivered send after it`,
            ).to.equal(true);
          }
          expect(Object.values(dispatcher.stats.dropped).reduce((a, b) => a + b, 0)).to.equal(0);
        },
      ),
      { numRuns: 150 },
    );
  });
});
