// The KCP breaker with an injected clock, alone and inside the dispatcher: while KCP cannot be reached,
// one callback at a time probes it; a reachable answer lets every worker go again.
import { expect } from 'chai';
import type { WatchEventV2 } from '@skr-watcher/api';
import { silentLogger } from '@skr-watcher/telemetry';
import { KcpBreaker } from '../src/dispatch/breaker.js';
import { Dispatcher, isUnreachable, type DeliveryOutcome } from '../src/dispatch/index.js';
import { ManualClock, settle } from '../../test/support/manual-clock.js';

const REFUSED: DeliveryOutcome = { result: 'retry', reason: 'ECONNREFUSED: connect ECONNREFUSED' };
const DELIVERED: DeliveryOutcome = { result: 'delivered', status: 200 };

function breaker(clock = new ManualClock()) {
  // Probe delays 100, 200, 400, 400, ... ms: doubling from 100, capped at 400, no jitter.
  const subject = new KcpBreaker({
    threshold: 3,
    clock,
    delayMs: (level) => Math.min(400, 100 * 2 ** (level - 1)),
    eagerIntervalMs: 50,
  });
  return { clock, subject };
}

describe('KcpBreaker', () => {
  it('stays closed below the threshold, and a reachable answer resets the count', () => {
    const { subject } = breaker();
    expect(subject.unreachable(false)).to.equal(false);
    expect(subject.unreachable(false)).to.equal(false);
    subject.reachable();
    expect(subject.unreachable(false)).to.equal(false);
    expect(subject.unreachable(false)).to.equal(false);
    expect(subject.state).to.equal('closed');
    expect(subject.acquire()).to.equal('send');
  });

  it('opens after threshold failures, lets one probe through once its delay has passed', async () => {
    const { clock, subject } = breaker();
    subject.unreachable(false);
    subject.unreachable(false);
    expect(subject.unreachable(false), 'third failure opens it').to.equal(true);
    expect(subject.state).to.equal('open');
    expect(subject.probeAt()).to.equal(100);
    expect(subject.acquire()).to.equal('wait');
    await clock.advance(99);
    expect(subject.acquire()).to.equal('wait');
    await clock.advance(1);
    expect(subject.acquire()).to.equal('probe');
    expect(subject.state).to.equal('probing');
    expect(subject.acquire(), 'only one probe at a time').to.equal('wait');
  });

  it('a failed probe reopens it with doubling, capped delays; stragglers do not', async () => {
    const { clock, subject } = breaker();
    for (let i = 0; i < 3; i++) subject.unreachable(false);
    const delays: number[] = [];
    for (let i = 0; i < 5; i++) {
      const openedAt = clock.now();
      expect(subject.unreachable(false), 'a straggler while open changes nothing').to.equal(false);
      delays.push((subject.probeAt() ?? NaN) - openedAt);
      await clock.advance((subject.probeAt() ?? 0) - openedAt);
      expect(subject.acquire()).to.equal('probe');
      expect(subject.unreachable(false), 'a straggler while probing changes nothing').to.equal(false);
      expect(subject.unreachable(true)).to.equal(true);
    }
    expect(delays).to.deep.equal([100, 200, 400, 400, 400]);
  });

  it('a reachable probe closes it and the next outage starts from the shortest delay', async () => {
    const { clock, subject } = breaker();
    for (let i = 0; i < 3; i++) subject.unreachable(false);
    await clock.advance(100);
    subject.acquire();
    subject.unreachable(true);
    await clock.advance(200);
    expect(subject.acquire()).to.equal('probe');
    expect(subject.reachable()).to.equal(true);
    expect(subject.state).to.equal('closed');
    expect(subject.acquire()).to.equal('send');
    for (let i = 0; i < 3; i++) subject.unreachable(false);
    expect((subject.probeAt() ?? NaN) - clock.now()).to.equal(100);
  });

  it('with fresh changes, probes as often as the eager interval, whatever the probe delay', async () => {
    const { clock, subject } = breaker();
    for (let i = 0; i < 3; i++) subject.unreachable(false);
    expect(subject.probeAt(true)).to.equal(50);
    await clock.advance(49);
    expect(subject.acquire(true)).to.equal('wait');
    await clock.advance(1);
    expect(subject.acquire(false), 'no fresh change: waits for the probe delay').to.equal('wait');
    expect(subject.acquire(true)).to.equal('probe');
    subject.unreachable(true);
    // Level 2: the scheduled probe is 200 ms away, an eager one 50 ms.
    expect(subject.probeAt(false)).to.equal(250);
    expect(subject.probeAt(true)).to.equal(100);
  });

  it('a reachable straggler closes an open breaker at once', () => {
    const { subject } = breaker();
    for (let i = 0; i < 3; i++) subject.unreachable(false);
    expect(subject.reachable()).to.equal(true);
    expect(subject.acquire()).to.equal('send');
  });

  it('counts network errors and gateway 502/503/504 as unreachable, other answers as reachable', () => {
    expect(isUnreachable(REFUSED)).to.equal(true);
    expect(isUnreachable({ result: 'retry', reason: 'HTTP 503', status: 503 })).to.equal(true);
    expect(isUnreachable({ result: 'retry', reason: 'HTTP 500', status: 500 })).to.equal(false);
    expect(isUnreachable({ result: 'retry', reason: 'HTTP 401', status: 401 })).to.equal(false);
    expect(isUnreachable({ result: 'rejected', reason: 'HTTP 403', status: 403 })).to.equal(false);
    expect(isUnreachable(DELIVERED)).to.equal(false);
  });
});

function event(name: string): WatchEventV2 {
  return {
    watched: { Namespace: 'kyma-system', Name: name },
    watchedGvk: { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Sample' },
  };
}

/** A KCP that is down until `up` is set; answers at once. */
function switchableKcp(clock: ManualClock) {
  const kcp = {
    up: false,
    calls: [] as { name: string; at: number }[],
    inFlight: 0,
    maxInFlight: 0,
    send: (_manager: string, sent: WatchEventV2): Promise<DeliveryOutcome> => {
      kcp.calls.push({ name: sent.watched.Name, at: clock.now() });
      kcp.maxInFlight = Math.max(kcp.maxInFlight, ++kcp.inFlight);
      return new Promise((resolve) =>
        setImmediate(() => {
          kcp.inFlight--;
          resolve(kcp.up ? DELIVERED : REFUSED);
        }),
      );
    },
  };
  return kcp;
}

describe('Dispatcher with KCP unreachable', () => {
  function setup(maxAgeMs = 600_000) {
    const clock = new ManualClock();
    const kcp = switchableKcp(clock);
    const opened: boolean[] = [];
    const dispatcher = new Dispatcher({
      send: kcp.send,
      workers: 4,
      maxQueue: 1000,
      backoffInitialMs: 100,
      backoffMaxMs: 1_000,
      maxAgeMs,
      logger: silentLogger(),
      clock,
      random: () => 0.5,
      observer: {
        enqueued: () => undefined,
        coalesced: () => undefined,
        delivered: () => undefined,
        dropped: () => undefined,
        depth: () => undefined,
        attempt: () => undefined,
        breaker: (open) => opened.push(open),
      },
    });
    return { clock, kcp, dispatcher, opened };
  }

  it('probes with one callback at a time instead of retrying every object, then delivers all', async () => {
    const { clock, kcp, dispatcher, opened } = setup();
    for (let i = 0; i < 100; i++) dispatcher.enqueue('m', event(`o${i}`));
    await settle();
    // The first round of workers found KCP down and opened the breaker.
    expect(dispatcher.breakerState).to.equal('open');
    expect(opened).to.deep.equal([true]);
    const beforeOutage = kcp.calls.length;
    expect(beforeOutage).to.be.at.most(8);
    await clock.advance(30_000);
    const attemptsWhileDown = kcp.calls.length - beforeOutage;
    // Without the breaker: 100 objects × ~40 retries each in 30 s at up to 750 ms apart.
    expect(attemptsWhileDown, 'one probe per breaker delay').to.be.within(30, 50);
    expect(kcp.maxInFlight, 'probes never overlap').to.be.at.most(4);
    const probeTimes = kcp.calls.slice(beforeOutage).map((call) => call.at);
    for (let i = 1; i < probeTimes.length; i++)
      expect((probeTimes[i] ?? 0) - (probeTimes[i - 1] ?? 0)).to.be.at.least(75);
    expect(dispatcher.depth).to.equal(100);

    kcp.up = true;
    await clock.advance(1_000);
    // Each delivery takes a few turns of the event loop; let the workers work through the 100.
    for (let i = 0; i < 40; i++) await settle();
    expect(dispatcher.breakerState).to.equal('closed');
    expect(opened).to.deep.equal([true, false]);
    expect(dispatcher.depth, 'every held object delivered once KCP is back').to.equal(0);
    expect(dispatcher.stats.delivered).to.equal(100);
    expect(clock.pendingTimers).to.equal(0);
  });

  it('a change while KCP is held probes after the eager interval; success lets what backs off go at once', async () => {
    const { clock, kcp, dispatcher } = setup();
    dispatcher.enqueue('m', event('a'));
    await settle();
    // Attempts at 0, 75, 225 (the breaker opens: probe at 300), 525 and 1125 ms; a now backs off for
    // 750 ms (until 1875) while the breaker's next scheduled probe is at 1425.
    await clock.advance(1_200);
    expect(kcp.calls.map((call) => call.at)).to.deep.equal([0, 75, 225, 525, 1125]);
    kcp.up = true;
    dispatcher.enqueue('m', event('b'));
    await settle();
    expect(kcp.calls, 'b waits: the last probe was only 75 ms ago').to.have.length(5);
    await clock.advance(25);
    for (let i = 0; i < 10; i++) await settle();
    // b probes 100 ms (BACKOFF_INITIAL_MS) after the last probe; its success lets a go at once.
    expect(kcp.calls.slice(5)).to.deep.equal([
      { name: 'b', at: 1225 },
      { name: 'a', at: 1225 },
    ]);
    expect(dispatcher.depth).to.equal(0);
  });

  it('steady changes while KCP stays down probe at most once per eager interval', async () => {
    const { clock, kcp, dispatcher } = setup();
    for (let i = 0; i < 100; i++) dispatcher.enqueue('m', event(`o${i}`));
    await settle();
    const before = kcp.calls.length;
    for (let t = 0; t < 5_000; t += 10) {
      dispatcher.enqueue('m', event(`o${t % 100}`));
      await clock.advance(10);
    }
    const probes = kcp.calls.slice(before);
    // 5 s at one probe per 100 ms at most; without the breaker: hundreds of retries a second.
    expect(probes.length).to.be.within(40, 51);
    for (let i = 1; i < probes.length; i++)
      expect((probes[i]?.at ?? 0) - (probes[i - 1]?.at ?? 0)).to.be.at.least(100);
    expect(dispatcher.depth).to.equal(100);
  });

  it('still drops held events past their max age while the breaker is open', async () => {
    const { clock, kcp, dispatcher } = setup(5_000);
    for (let i = 0; i < 20; i++) dispatcher.enqueue('m', event(`o${i}`));
    await settle();
    expect(dispatcher.breakerState).to.equal('open');
    await clock.advance(7_000);
    expect(dispatcher.depth).to.equal(0);
    expect(dispatcher.stats.dropped.max_age).to.equal(20);
    expect(dispatcher.resyncsPending, 'what aged out is covered by a resync, kept until delivered').to.equal(
      1,
    );
    kcp.up = true;
    dispatcher.enqueue('m', event('after'));
    await clock.advance(35_000);
    expect(dispatcher.stats.delivered).to.equal(1);
    expect(dispatcher.resyncsPending).to.equal(0);
    expect(kcp.calls.some((c) => c.name === 'skr-webhook')).to.equal(true);
    expect(clock.pendingTimers).to.equal(0);
  });

  it('a change of a held object refreshes its age and is delivered after the outage', async () => {
    const { clock, kcp, dispatcher } = setup(5_000);
    dispatcher.enqueue('m', event('a'));
    dispatcher.enqueue('m', event('b'));
    dispatcher.enqueue('m', event('c'));
    await settle();
    await clock.advance(4_000);
    expect(dispatcher.enqueue('m', event('a'))).to.equal('coalesced');
    await clock.advance(3_000);
    expect(dispatcher.depth, 'b and c aged out, a did not').to.equal(1);
    kcp.up = true;
    await clock.advance(1_000);
    expect(dispatcher.stats.delivered).to.equal(1);
    expect(kcp.calls.at(-1)?.name).to.equal('a');
  });
});
