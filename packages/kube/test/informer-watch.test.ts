// One watch of an informer on its own, with a manual clock and a scripted stand-in for client-node's Watch: the
// outcome each way a watch ends maps to, the watchdog, the resync timer, and the restart backoff. What a real
// API server sends is proven in informer.test.ts; here, only what this code makes of it.
import { expect } from 'chai';
import { createLogger } from '@skr-watcher/telemetry';
import { ManualClock, settle } from '../../../test/support/manual-clock.js';
import { RestartBackoff } from '../src/informer/backoff.js';
import { WatchFailure } from '../src/informer/failure.js';
import { openWatch, type WatchOutcome, type Watcher, type WatchTimers } from '../src/informer/watch.js';

interface WatchCall {
  path: string;
  query: Record<string, string | number | boolean | undefined>;
  send(type: string, object: unknown): void;
  done(error: unknown): void;
  aborted: boolean;
}

/** A Watch whose events the test sends; `opening` holds the answer to watch() until the test lets it go. */
function scriptedWatcher(opening: Promise<void> = Promise.resolve()) {
  const calls: WatchCall[] = [];
  const watcher: Watcher = {
    watch: async (path, query, onEvent, onDone) => {
      const call: WatchCall = { path, query, send: onEvent, done: onDone, aborted: false };
      calls.push(call);
      await opening;
      return { abort: () => void (call.aborted = true) };
    },
  };
  return { watcher, calls };
}

const REQUEST = {
  resource: 'kymas',
  path: '/apis/operator.kyma-project.io/v1beta2/kymas',
  labelSelector: 'a=b',
  fieldSelector: 'metadata.name=x',
  resourceVersion: '42',
};

/** Opens a watch on a fresh clock; `outcome` settles with the outcome or the error it ended with. */
async function watchOn(timers: Partial<WatchTimers> = {}, opening?: Promise<void>) {
  const clock = new ManualClock();
  const { watcher, calls } = scriptedWatcher(opening);
  const events: string[] = [];
  const watch = openWatch(watcher, REQUEST, { clock, watchdogMs: 1_000, ...timers }, (type) =>
    events.push(type),
  );
  const outcome: Promise<WatchOutcome | Error> = watch.ended.catch((error: Error) => error);
  await settle();
  const call = calls[0]!;
  return { clock, watch, call, events, outcome };
}

describe('openWatch', () => {
  it('watches the path from the resourceVersion, with bookmarks, the selectors and a server timeout of 5 to 10 min', async () => {
    const { call, watch } = await watchOn();
    expect(call.path).to.equal(REQUEST.path);
    const { timeoutSeconds, ...query } = call.query;
    expect(query).to.deep.equal({
      resourceVersion: '42',
      allowWatchBookmarks: true,
      labelSelector: 'a=b',
      fieldSelector: 'metadata.name=x',
    });
    expect(timeoutSeconds).to.be.within(300, 599);
    watch.stop();
  });

  it('ends as watchdog after watchdogMs without an event; every event, bookmarks too, restarts the watchdog', async () => {
    const { clock, call, events, outcome } = await watchOn();
    await clock.advance(900);
    call.send('BOOKMARK', { metadata: { resourceVersion: '43' } });
    await clock.advance(900);
    call.send('MODIFIED', { metadata: { name: 'a' } });
    await clock.advance(999);
    expect(call.aborted).to.equal(false);
    await clock.advance(1);
    expect(await outcome).to.equal('watchdog');
    expect(events).to.deep.equal(['BOOKMARK', 'MODIFIED']);
    expect(call.aborted).to.equal(true);
    expect(clock.pendingTimers).to.equal(0);
  });

  it('ends as gone on an ERROR event with code 410, and fails on any other ERROR event with its code and message', async () => {
    const gone = await watchOn();
    gone.call.send('ERROR', { code: 410, message: 'too old resource version' });
    expect(await gone.outcome).to.equal('gone');
    expect(gone.events).to.deep.equal(['ERROR']);

    const failed = await watchOn();
    failed.call.send('ERROR', { code: 500, message: 'etcd unavailable' });
    const error = await failed.outcome;
    expect(error).to.be.instanceOf(WatchFailure);
    expect((error as WatchFailure).code).to.equal(500);
    expect((error as WatchFailure).message).to.equal('watch kymas: error event 500 etcd unavailable');
  });

  it('tells closed, 410 Gone, a client timeout and a failed connection apart when the connection ends', async () => {
    const ending = async (error: unknown) => {
      const { call, outcome } = await watchOn();
      call.done(error);
      return outcome;
    };
    expect(await ending(undefined)).to.equal('closed');
    expect(await ending(Object.assign(new Error('gone'), { statusCode: 410 }))).to.equal('gone');
    expect(await ending(Object.assign(new Error('no bytes for 30 s'), { name: 'TimeoutError' }))).to.equal(
      'timeout',
    );
    const reset = new Error('socket hang up');
    const failure = await ending(Object.assign(reset, { code: 503 }));
    expect(failure).to.be.instanceOf(WatchFailure);
    expect((failure as WatchFailure).code).to.equal(503);
    expect((failure as WatchFailure).cause).to.equal(reset);
  });

  it('fails when the watch cannot be opened', async () => {
    const clock = new ManualClock();
    const refused = new Error('connect ECONNREFUSED');
    const watcher: Watcher = { watch: () => Promise.reject(refused) };
    const watch = openWatch(watcher, REQUEST, { clock, watchdogMs: 1_000 }, () => {});
    const error = await watch.ended.catch((e: unknown) => e);
    expect(error).to.be.instanceOf(WatchFailure);
    expect((error as WatchFailure).cause).to.equal(refused);
    expect(clock.pendingTimers).to.equal(0);
  });

  it('ends as stopped on stop(), aborts a connection that opens only afterwards, and passes on no later event', async () => {
    let open!: () => void;
    const { watch, call, events, outcome, clock } = await watchOn(
      {},
      new Promise<void>((resolve) => (open = resolve)),
    );
    watch.stop();
    expect(await outcome).to.equal('stopped');
    expect(call.aborted).to.equal(false);
    open();
    await settle();
    expect(call.aborted).to.equal(true);
    call.send('ADDED', { metadata: { name: 'late' } });
    call.done(Object.assign(new Error('aborted'), { name: 'AbortError' }));
    watch.stop();
    expect(events).to.deep.equal([]);
    expect(clock.pendingTimers).to.equal(0);
  });

  it('resyncs after firstInMs and then every everyMs while the watch lasts, and not after it ended', async () => {
    let resyncs = 0;
    const { clock, call, watch, outcome } = await watchOn({
      watchdogMs: 60_000,
      resync: { firstInMs: 100, everyMs: 1_000, run: () => resyncs++ },
    });
    await clock.advance(99);
    expect(resyncs).to.equal(0);
    await clock.advance(1);
    expect(resyncs).to.equal(1);
    await clock.advance(2_000);
    expect(resyncs).to.equal(3);
    expect(call.aborted).to.equal(false);
    watch.stop();
    expect(await outcome).to.equal('stopped');
    await clock.advance(5_000);
    expect(resyncs).to.equal(3);
  });
});

/** A manual clock that also records the delay of every timer set on it. */
class RecordingClock extends ManualClock {
  readonly delays: number[] = [];
  override setTimeout(callback: () => void, ms: number): unknown {
    this.delays.push(ms);
    return super.setTimeout(callback, ms);
  }
}

describe('RestartBackoff', () => {
  /** Fails once and lets the whole delay pass. */
  const failOnce = async (clock: ManualClock, backoff: RestartBackoff) => {
    const wait = backoff.after(new Error('list failed'));
    await clock.advance(60_000);
    await wait;
  };

  it('waits base, then doubling delays up to max after consecutive failures, and base again after a reset', async () => {
    const clock = new RecordingClock();
    const backoff = new RestartBackoff({ clock, baseMs: 100, maxMs: 350, random: () => 1 });
    for (let i = 0; i < 4; i++) await failOnce(clock, backoff);
    expect(backoff.consecutiveFailures).to.equal(4);
    backoff.reset();
    await failOnce(clock, backoff);
    expect(clock.delays).to.deep.equal([100, 200, 350, 350, 100]);
  });

  it('resolves when its delay has passed, not before', async () => {
    const clock = new ManualClock();
    const backoff = new RestartBackoff({ clock, baseMs: 100, maxMs: 100, random: () => 1 });
    let done = false;
    const wait = backoff.after(new Error('watch failed')).then(() => (done = true));
    await clock.advance(99);
    expect(done).to.equal(false);
    await clock.advance(1);
    await wait;
    expect(done).to.equal(true);
  });

  it('jitters each delay between half of it and all of it', async () => {
    const clock = new RecordingClock();
    await failOnce(clock, new RestartBackoff({ clock, baseMs: 1_000, maxMs: 1_000, random: () => 0 }));
    await failOnce(clock, new RestartBackoff({ clock, baseMs: 1_000, maxMs: 1_000, random: () => 0.5 }));
    expect(clock.delays).to.deep.equal([500, 750]);
  });

  it('resolves at once on wake (the informer stops), leaving no timer behind', async () => {
    const clock = new ManualClock();
    const backoff = new RestartBackoff({ clock, baseMs: 10_000, maxMs: 10_000 });
    let woken = false;
    const wait = backoff.after(new Error('list failed')).then(() => (woken = true));
    await settle();
    expect(woken).to.equal(false);
    backoff.wake();
    await wait;
    expect(woken).to.equal(true);
    expect(clock.pendingTimers).to.equal(0);
    backoff.wake();
  });

  it('logs each failure as one warn line with the failure count and the delay', async () => {
    const lines: { level: string; msg: string; failures: number; retryInMs: number }[] = [];
    const logger = createLogger('test', 'debug', {
      write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[number]),
    });
    const clock = new ManualClock();
    const backoff = new RestartBackoff({ clock, baseMs: 100, maxMs: 100, logger, random: () => 1 });
    const wait = backoff.after(new Error('list failed'));
    await clock.advance(100);
    await wait;
    expect(
      lines.map(({ level, msg, failures, retryInMs }) => ({ level, msg, failures, retryInMs })),
    ).to.deep.equal([
      { level: 'warn', msg: 'list/watch failed; retrying with backoff', failures: 1, retryInMs: 100 },
    ]);
  });
});
