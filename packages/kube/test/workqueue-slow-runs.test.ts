// A run's slow clock on its own, with a manual clock: a run goes slow after slowAfterMs without an API server
// answer, answers and requests to the shared KCP keep it a worker, waiting inside the process stops the clock.
import { AsyncLocalStorage } from 'node:async_hooks';
import { expect } from 'chai';
import { ManualClock, settle } from '../../../test/support/manual-clock.js';
import { SlowRunClock, noteAnswer, whileSharedClusterWorks } from '../src/workqueue/slow-runs.js';

/**
 * A run held open until `end`; `answer` and `askKcp` act on the run's async path, as a cluster client inside it
 * would. `slowAt` is when the run went slow, if it did.
 */
function heldRun(options: { stopping?: () => boolean } = {}) {
  const clock = new ManualClock();
  let slowAt: number | undefined;
  let slowCalls = 0;
  const slow = new SlowRunClock({
    clock,
    slowAfterMs: 1_000,
    stopping: options.stopping ?? (() => false),
    onSlow: () => {
      slowCalls += 1;
      slowAt = clock.now();
    },
  });
  let end!: () => void;
  let answer!: () => void;
  let askKcp!: (reply: Promise<string>) => Promise<string>;
  const done = slow.run(async () => {
    answer = AsyncLocalStorage.bind(() => noteAnswer());
    askKcp = AsyncLocalStorage.bind((reply: Promise<string>) => whileSharedClusterWorks(() => reply));
    await new Promise<void>((resolve) => (end = resolve));
    return 'finished';
  });
  return {
    clock,
    slow,
    answer: () => answer(),
    askKcp: (reply: Promise<string>) => askKcp(reply),
    end: () => end(),
    done,
    slowAt: () => slowAt,
    slowCalls: () => slowCalls,
  };
}

describe('SlowRunClock', () => {
  it('goes slow once, slowAfterMs after the run started without an answer', async () => {
    const run = heldRun();
    await run.clock.advance(999);
    expect(run.slow.wentSlow).to.equal(false);
    await run.clock.advance(5_000);
    expect(run.slowAt()).to.equal(1_000);
    expect(run.slowCalls()).to.equal(1);
    expect(run.slow.wentSlow).to.equal(true);
    run.end();
    expect(await run.done).to.equal('finished');
  });

  it('goes slow only slowAfterMs after the last answer of an API server', async () => {
    const run = heldRun();
    await run.clock.advance(600);
    run.answer();
    await run.clock.advance(900);
    run.answer();
    await run.clock.advance(5_000);
    expect(run.slowAt()).to.equal(2_500);
    run.end();
  });

  it('stays a worker while a request to the KCP is in flight, and goes slow slowAfterMs after its answer', async () => {
    const run = heldRun();
    let reply!: (value: string) => void;
    const asked = run.askKcp(new Promise<string>((resolve) => (reply = resolve)));
    await run.clock.advance(10_000);
    expect(run.slow.wentSlow).to.equal(false);
    reply('kyma');
    expect(await asked).to.equal('kyma');
    await run.clock.advance(5_000);
    // The answer came at 10 s: slow one slowAfterMs later.
    expect(run.slowAt()).to.equal(11_000);
    run.end();
  });

  it('stops while the run waits inside the process, and starts afresh when it works again', async () => {
    const run = heldRun();
    await run.clock.advance(900);
    run.slow.phase.waiting();
    await run.clock.advance(10_000);
    expect(run.slow.wentSlow).to.equal(false);
    run.slow.phase.working();
    await run.clock.advance(999);
    expect(run.slow.wentSlow).to.equal(false);
    await run.clock.advance(1);
    expect(run.slowAt()).to.equal(11_900);
    run.end();
  });

  it('never goes slow once the run ended, nor arms again once the queue stops', async () => {
    const ended = heldRun();
    ended.end();
    await ended.done;
    ended.slow.end();
    ended.slow.phase.working();
    await ended.clock.advance(10_000);
    expect(ended.slow.wentSlow).to.equal(false);
    expect(ended.clock.pendingTimers).to.equal(0);

    let stopping = false;
    const stopped = heldRun({ stopping: () => stopping });
    stopping = true;
    stopped.slow.disarm();
    stopped.slow.phase.working();
    await stopped.clock.advance(10_000);
    expect(stopped.slow.wentSlow).to.equal(false);
    expect(stopped.clock.pendingTimers).to.equal(0);
    stopped.end();
  });

  it('lets noteAnswer and whileSharedClusterWorks outside any run do nothing but the request', async () => {
    noteAnswer();
    expect(await whileSharedClusterWorks(async () => 'answer')).to.equal('answer');
    await settle();
  });
});
