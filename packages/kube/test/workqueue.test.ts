// WorkQueue: client-go semantics, proved with a manual clock (no sleeping) and real promises.
import { expect } from 'chai';
import { createLogger, createRegistry } from '@skr-watcher/telemetry';
import { ManualClock } from '../../../test/support/manual-clock.js';
import {
  noteAnswer,
  whileSharedClusterWorks,
  WorkQueue,
  type ProcessResult,
  type RunPhase,
} from '../src/workqueue.js';

/** A promise the test resolves by hand, to hold a key "in processing". */
function deferred<T = void>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

type Gate = ReturnType<typeof deferred<void>>;

const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** One worker whose runs count as slow after 1 s; `started` lists the keys in the order their runs began. */
function slowAfterASecond(clock: ManualClock, work: (key: string, phase: RunPhase) => Promise<void>) {
  const started: string[] = [];
  const queue = new WorkQueue({
    name: 'test',
    workers: 1,
    clock,
    slowAfterMs: 1_000,
    process: async (key, phase) => {
      started.push(key);
      await work(key, phase);
    },
  });
  return { queue, started };
}

/** Two workers; `runs` lists the keys in the order their runs began, `work` learns which run of its key it is. */
function twoWorkers(clock: ManualClock, work: (key: string, nth: number) => Promise<void>) {
  const runs: string[] = [];
  const queue = new WorkQueue({
    name: 'test',
    workers: 2,
    clock,
    process: async (key) => {
      runs.push(key);
      await work(key, runs.filter((run) => run === key).length);
    },
  });
  return { queue, runs };
}

/** Moves the clock on and lets what it woke run. */
async function advance(clock: ManualClock, ms: number): Promise<void> {
  await clock.advance(ms);
  await settle();
}

describe('WorkQueue', () => {
  it('coalesces adds of a key that is waiting into one run', async () => {
    const runs: string[] = [];
    const queue = new WorkQueue({ name: 'test', process: async (key) => void runs.push(key) });
    for (let i = 0; i < 100; i++) queue.add('ns/a');
    queue.add('ns/b');
    expect(queue.depth).to.equal(2);
    queue.start();
    await queue.whenIdle();
    expect(runs).to.deep.equal(['ns/a', 'ns/b']);
    await queue.stop();
  });

  it('never processes one key twice at once, and re-runs a key added during its run once afterwards', async () => {
    const gates: Gate[] = [];
    let concurrent = 0;
    let maxConcurrent = 0;
    const queue = new WorkQueue({
      name: 'test',
      workers: 4,
      process: async () => {
        concurrent++;
        maxConcurrent = Math.max(maxConcurrent, concurrent);
        const gate = deferred<void>();
        gates.push(gate);
        await gate.promise;
        concurrent--;
      },
    });
    queue.start();
    queue.add('k');
    await settle();
    expect(gates).to.have.length(1);
    queue.add('k');
    queue.add('k');
    queue.add('k');
    await settle();
    expect(gates, 'a second run must wait for the first').to.have.length(1);
    gates[0]!.resolve();
    await settle();
    expect(gates, 'the adds during the run become exactly one more run').to.have.length(2);
    gates[1]!.resolve();
    await queue.whenIdle();
    expect(gates).to.have.length(2);
    expect(maxConcurrent).to.equal(1);
    await queue.stop();
  });

  it('runs different keys in parallel up to the number of workers', async () => {
    const gates: Gate[] = [];
    const queue = new WorkQueue({
      name: 'test',
      workers: 3,
      process: async () => {
        const gate = deferred<void>();
        gates.push(gate);
        await gate.promise;
      },
    });
    for (const key of ['a', 'b', 'c', 'd', 'e']) queue.add(key);
    queue.start();
    await settle();
    expect(gates).to.have.length(3);
    expect(queue.inFlight).to.equal(3);
    expect(queue.depth).to.equal(2);
    gates[0]!.resolve();
    await settle();
    expect(gates).to.have.length(4);
    for (const gate of gates) gate.resolve();
    await settle();
    for (const gate of gates) gate.resolve();
    await queue.whenIdle();
    expect(gates).to.have.length(5);
    await queue.stop();
  });

  it('backs a failing key off exponentially from 5 s to 30 s and resets after a success', async () => {
    const clock = new ManualClock();
    let failing = true;
    const runsAt: number[] = [];
    const queue = new WorkQueue({
      name: 'test',
      clock,
      process: async () => {
        runsAt.push(clock.now());
        if (failing) throw new Error('SKR unreachable');
      },
    });
    queue.start();
    const t0 = clock.now();
    queue.add('k');
    await queue.whenIdle();
    // Failures 1..6 back off 5, 10, 20, 30, 30 s.
    for (const expected of [5_000, 10_000, 20_000, 30_000, 30_000]) {
      await clock.advance(expected - 1);
      await settle();
      const before = runsAt.length;
      await clock.advance(1);
      await queue.whenIdle();
      expect(runsAt.length, `a retry exactly ${expected} ms after the last failure`).to.equal(before + 1);
    }
    expect(runsAt.map((t) => t - t0)).to.deep.equal([0, 5_000, 15_000, 35_000, 65_000, 95_000]);
    expect(queue.failuresOf('k')).to.equal(6);
    failing = false;
    await clock.advance(30_000);
    await queue.whenIdle();
    expect(queue.failuresOf('k'), 'a success resets the backoff').to.equal(0);
    expect(clock.pendingTimers, 'nothing is scheduled after a success without requeue').to.equal(0);
    failing = true;
    queue.add('k');
    await queue.whenIdle();
    expect(queue.failuresOf('k')).to.equal(1);
    const before = runsAt.length;
    await clock.advance(5_000);
    await queue.whenIdle();
    expect(runsAt.length, 'after the reset the first retry is 5 s again').to.equal(before + 1);
    await queue.stop();
  });

  it('requeues after the delay a run asks for, and an earlier schedule of the key wins', async () => {
    const clock = new ManualClock();
    const runs: number[] = [];
    let answer: ProcessResult = { requeueAfterMs: 300_000 };
    const queue = new WorkQueue({
      name: 'test',
      clock,
      process: async () => {
        runs.push(clock.now());
        return answer;
      },
    });
    queue.start();
    const t0 = clock.now();
    queue.add('k');
    await queue.whenIdle();
    queue.addAfter('k', 2_000);
    queue.addAfter('k', 10_000);
    expect(queue.delayedCount).to.equal(1);
    answer = {};
    await clock.advance(2_000);
    await queue.whenIdle();
    expect(runs.map((t) => t - t0)).to.deep.equal([0, 2_000]);
    await clock.advance(600_000);
    await queue.whenIdle();
    expect(runs, 'the later schedules were replaced by the earlier one').to.have.length(2);
    await queue.stop();
  });

  it('frees the worker of a run that hangs past slowAfterMs, so a new key starts while 20 keys hang', async () => {
    const clock = new ManualClock();
    const hung = deferred<void>();
    const started: string[] = [];
    const queue = new WorkQueue({
      name: 'test',
      workers: 4,
      clock,
      slowAfterMs: 1_000,
      process: async (key) => {
        started.push(key);
        if (key.startsWith('hung')) await hung.promise;
      },
    });
    queue.start();
    for (let i = 0; i < 20; i++) queue.add(`hung-${i}`);
    await settle();
    expect(started).to.have.length(4);
    // Each second the runs still waiting leave the worker lane, and the next keys start.
    for (let second = 0; second < 5; second++) {
      await clock.advance(1_000);
      await settle();
    }
    expect(started).to.have.length(20);
    queue.add('healthy');
    await settle();
    expect(started).to.include('healthy');

    hung.resolve();
    await queue.stop();
  });

  it('does not count a run as slow while it waits inside the process (for a pacing slot), only once it works', async () => {
    const clock = new ManualClock();
    const slot = deferred<void>();
    const hung = deferred<void>();
    const { queue, started } = slowAfterASecond(clock, async (key, phase) => {
      if (key !== 'paced') return;
      phase.waiting();
      await slot.promise; // a pacing slot, held for 5 s
      phase.working();
      await hung.promise; // then its cluster does not answer
    });
    queue.start();
    queue.add('paced');
    queue.add('next');
    await settle();
    await advance(clock, 5_000);
    expect(started, 'the waiting run keeps its worker').to.deep.equal(['paced']);
    slot.resolve();
    await settle();
    await advance(clock, 999);
    expect(started).to.deep.equal(['paced']);
    await advance(clock, 1);
    expect(started, 'slow a second after it started working').to.deep.equal(['paced', 'next']);

    hung.resolve();
    await queue.stop();
  });

  it('keeps a long run as a worker while API servers answer it, and counts it slow a second after the last answer', async () => {
    const clock = new ManualClock();
    const answer = deferred<void>();
    const hung = deferred<void>();
    const { queue, started } = slowAfterASecond(clock, async (key) => {
      if (key !== 'busy') return;
      // Ten answers, 800 ms apart (a pass with much to do on a loaded machine), then a cluster that is silent.
      for (let i = 0; i < 10; i++) {
        await answer.promise;
        noteAnswer();
        await new Promise<void>((resolve) => clock.setTimeout(resolve, 800));
      }
      await hung.promise;
    });
    queue.start();
    queue.add('busy');
    queue.add('next');
    await settle();
    answer.resolve();
    for (let i = 0; i < 10; i++) {
      await settle();
      await clock.advance(800);
    }
    await settle();
    expect(started, 'answered runs keep their worker').to.deep.equal(['busy']);
    await advance(clock, 199);
    expect(started).to.deep.equal(['busy']);
    await advance(clock, 1);
    expect(started, 'slow a second after its last answer').to.deep.equal(['busy', 'next']);

    hung.resolve();
    await queue.stop();
  });

  it('keeps a run as a worker while it waits on the KCP (shared by every run), however long', async () => {
    const clock = new ManualClock();
    const kcp = deferred<void>();
    const { queue, started } = slowAfterASecond(clock, async (key) => {
      if (key === 'busy') await whileSharedClusterWorks(() => kcp.promise);
    });
    queue.start();
    queue.add('busy');
    queue.add('next');
    await settle();
    await advance(clock, 5_000);
    expect(started, 'a slow KCP frees no worker').to.deep.equal(['busy']);
    kcp.resolve();
    await queue.stop({ drain: true });
    expect(started).to.deep.equal(['busy', 'next']);
  });

  it('runs a key whose last run succeeded before 20 new keys queued earlier that hang', async () => {
    const clock = new ManualClock();
    const hung = deferred<void>();
    const started: string[] = [];
    const queue = new WorkQueue({
      name: 'test',
      workers: 2,
      clock,
      slowAfterMs: 1_000,
      process: async (key) => {
        started.push(key);
        if (key.startsWith('hung')) await hung.promise;
      },
    });
    queue.start();
    queue.add('healthy');
    await queue.whenIdle(); // its cluster answered
    for (let i = 0; i < 20; i++) queue.add(`hung-${i}`); // new Kymas whose clusters never answer
    await settle();
    queue.add('healthy'); // its edit, behind 18 queued hung keys
    await settle();
    expect(started.filter((key) => key === 'healthy')).to.have.length(1);
    // The first worker to leave for the slow lane takes the healthy key, not the next hung one.
    await clock.advance(1_000);
    await settle();
    expect(started.slice(1, 4)).to.deep.equal(['hung-0', 'hung-1', 'healthy']);

    hung.resolve();
    await queue.stop();
  });

  it('runs keys added urgently before every key queued earlier, proven ones included, once each', async () => {
    const busy = deferred<void>();
    const started: string[] = [];
    const queue = new WorkQueue({
      name: 'test',
      workers: 1,
      process: async (key) => {
        started.push(key);
        if (key === 'busy') await busy.promise;
      },
    });
    queue.start();
    queue.add('own-0');
    await queue.whenIdle(); // proven: its cluster answered
    queue.add('busy'); // holds the only worker
    await settle();
    for (let i = 0; i < 3; i++) queue.add(`own-${i}`); // a resync of this replica's own Kymas
    queue.add('taken-1'); // queued as routine work first, then acquired: it moves up
    queue.addUrgent('taken-2');
    queue.addUrgent('taken-1');
    queue.addUrgent('busy'); // running: its next run is urgent
    expect(queue.depth).to.equal(5);
    busy.resolve();
    await queue.whenIdle();
    expect(started).to.deep.equal(['own-0', 'busy', 'taken-1', 'taken-2', 'busy', 'own-0', 'own-1', 'own-2']);
    // Urgency is for one run: added again normally, a key queues in order.
    queue.add('own-1');
    queue.add('taken-2');
    await queue.whenIdle();
    expect(started.slice(-2)).to.deep.equal(['own-1', 'taken-2']);
    await queue.stop();
  });

  it('lets keys whose last run failed hold all workers but one, so a healthy key never waits behind them', async () => {
    const clock = new ManualClock();
    const gate = deferred<void>();
    const { queue, runs } = twoWorkers(clock, async (key, nth) => {
      if (!key.startsWith('bad')) return;
      if (nth === 1) throw new Error('SKR unreachable');
      await gate.promise; // the second run waits on its cluster
    });
    queue.start();
    queue.add('bad-1');
    queue.add('bad-2');
    await settle();
    await clock.advance(5_000); // both back off 5 s, then run again
    await settle();
    expect(runs).to.deep.equal(['bad-1', 'bad-2', 'bad-1']);
    queue.add('good');
    await settle();
    expect(runs).to.deep.equal(['bad-1', 'bad-2', 'bad-1', 'good']);
    gate.resolve();
    await settle();
    expect(runs).to.include('bad-2');
    await queue.stop();
  });

  it('retries a failed key while proven keys keep coming, after at most `workers` proven runs', async () => {
    // On a busy replica resyncs and Ready requeues keep proven keys queued at all times: the retry of a Kyma whose
    // pass failed in the start-up burst waited behind them for 46 minutes (bench:modules-scale, 5,000 Kymas).
    const clock = new ManualClock();
    let streaming = false;
    const { queue, runs } = twoWorkers(clock, async (key, nth) => {
      if (key === 'failing' && nth === 1) throw new Error('update CRD: HTTP 409');
      // A healthy Kyma's pass takes 100 ms and, while the stream lasts, queues its next one (a resync or a Ready
      // requeue): a proven key waits whenever a worker frees up.
      await new Promise<void>((resolve) => clock.setTimeout(resolve, 100));
      if (streaming && key !== 'failing') queue.add(key);
    });
    const healthy = ['own-0', 'own-1', 'own-2', 'own-3'];
    queue.start();
    for (const key of healthy) queue.add(key);
    await clock.advance(200);
    await queue.whenIdle(); // every healthy key ran once: proven
    queue.add('failing'); // fails at once: retried 5 s later
    await settle();
    expect(runs.filter((run) => run === 'failing')).to.have.length(1);
    streaming = true;
    for (const key of healthy) queue.add(key);
    await clock.advance(5_000); // the retry is queued now, behind the healthy stream
    await clock.advance(300);
    expect(
      runs.filter((run) => run === 'failing'),
      'the retry ran within 300 ms of being due',
    ).to.have.length(2);
    streaming = false;
    await clock.advance(1_000);
    await queue.stop();
  });

  it('stop() lets the keys in flight finish, drops queued ones and cancels delayed ones', async () => {
    const clock = new ManualClock();
    const finished: string[] = [];
    const gate = deferred<void>();
    const queue = new WorkQueue({
      name: 'test',
      workers: 1,
      clock,
      process: async (key) => {
        await gate.promise;
        finished.push(key);
      },
    });
    queue.start();
    queue.add('in-flight');
    queue.add('queued');
    queue.addAfter('delayed', 1_000);
    await settle();
    let stopped = false;
    const stopping = queue.stop().then(() => (stopped = true));
    await settle();
    expect(stopped, 'stop waits for the key in flight').to.equal(false);
    expect(clock.pendingTimers).to.equal(0);
    queue.add('after-stop');
    gate.resolve();
    await stopping;
    expect(finished).to.deep.equal(['in-flight']);
  });

  it('stop({ drain: true }) processes the keys queued at that moment', async () => {
    const finished: string[] = [];
    const queue = new WorkQueue({
      name: 'test',
      workers: 1,
      process: async (key) => void finished.push(key),
    });
    queue.start();
    queue.add('a');
    queue.add('b');
    queue.add('c');
    await queue.stop({ drain: true });
    expect(finished).to.deep.equal(['a', 'b', 'c']);
  });

  it('exports depth, adds, retries and durations with the queue name as the only label', async () => {
    const registry = createRegistry();
    const clock = new ManualClock();
    let calls = 0;
    const queue = new WorkQueue({
      name: 'kyma',
      clock,
      registry,
      process: async () => {
        if (calls++ === 0) throw new Error('first run fails');
      },
    });
    // A second queue on the same registry must not clash with the first one's metrics.
    const other = new WorkQueue({ name: 'other', registry, process: async () => {} });
    queue.add('a');
    queue.add('a');
    queue.add('b');
    const depth = await registry.getSingleMetric('workqueue_depth')!.get();
    expect(depth.values.find((v) => v.labels['name'] === 'kyma')?.value).to.equal(2);
    queue.start();
    await queue.whenIdle();
    await clock.advance(5_000);
    await queue.whenIdle();
    const text = await registry.metrics();
    expect(text).to.match(/workqueue_adds_total\{name="kyma"\} 4/);
    expect(text).to.match(/workqueue_retries_total\{name="kyma"\} 1/);
    expect(text).to.match(/workqueue_work_duration_seconds_count\{name="kyma"\} 3/);
    expect(text).to.match(/workqueue_depth\{name="kyma"\} 0/);
    await queue.stop();
    await other.stop();
  });

  it('logs a failure as one warn line, or leaves the warn line to a process that logs its own failures', async () => {
    const warnLines = async (processLogsFailures: boolean) => {
      const lines: { level: string; msg: string }[] = [];
      const logger = createLogger('test', 'debug', {
        write: (line: string) => void lines.push(JSON.parse(line) as { level: string; msg: string }),
      });
      const queue = new WorkQueue({
        name: 'test',
        clock: new ManualClock(),
        logger,
        processLogsFailures,
        process: async () => {
          throw new Error('cluster unreachable');
        },
      });
      queue.add('a');
      queue.start();
      await queue.whenIdle();
      await queue.stop();
      return lines.filter((l) => l.msg === 'processing failed').map((l) => l.level);
    };
    expect(await warnLines(false)).to.deep.equal(['warn']);
    expect(await warnLines(true)).to.deep.equal(['debug']);
  });
});
