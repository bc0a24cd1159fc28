// Runs in flight per Kyma: a withdrawn run's requests are aborted and it ends as "not ours", a handover can wait for
// every run of a key, and the journal records each start and end (a real file).
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { createClusterClient, type ClusterClient } from '@skr-watcher/kube';
import { Runs, WorkWithdrawnError, fileJournal } from '../src/sharding/runs.js';
import { startHeldSkr, type HeldSkr } from './support/gates.js';

/** A run that ends when `finish` is called, or fails with whatever its caller makes it fail with. */
function hungRun() {
  let finish: (value: string) => void = () => {};
  let fail: (error: Error) => void = () => {};
  const work = () =>
    new Promise<string>((resolve, reject) => {
      finish = resolve;
      fail = reject;
    });
  return { work, finish: (value: string) => finish(value), fail: (error: Error) => fail(error) };
}

describe('shard runs', () => {
  let skr: HeldSkr;
  let client: ClusterClient;
  before(async () => {
    skr = await startHeldSkr();
    client = await createClusterClient(skr.kubeConfig, { boundByDeadline: true });
  });
  after(async () => {
    await client?.close();
    await skr?.close();
  });

  it('aborts a withdrawn run’s SKR request with WorkWithdrawnError and resolves the run to undefined', async () => {
    const runs = new Runs();
    let failure: unknown;
    const result = runs.start('ns/kyma-a', () =>
      client.core.listNamespace().catch((error: unknown) => {
        failure = error;
        throw error;
      }),
    );
    expect(runs.idle).to.equal(false);
    expect([...runs.keys()]).to.deep.equal(['ns/kyma-a']);
    for (let i = 0; i < 200 && skr.held() === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(skr.held(), 'the request reached the SKR').to.equal(1);
    runs.withdraw('ns/kyma-a', 'handed over to b');
    expect(await result).to.equal(undefined);
    const causes = [failure, (failure as { cause?: unknown })?.cause];
    expect(
      causes.some((cause) => cause instanceof WorkWithdrawnError),
      `aborted with WorkWithdrawnError: ${String(failure)}`,
    ).to.equal(true);
    expect(runs.idle).to.equal(true);
  });

  it('ends a withdrawn run that fails as “not ours” (undefined), one that was never withdrawn with its error', async () => {
    const runs = new Runs();
    const withdrawn = hungRun();
    const result = runs.start('ns/a', withdrawn.work);
    runs.withdraw('ns/a', 'membership renewal overdue');
    withdrawn.fail(new Error('aborted request'));
    expect(await result).to.equal(undefined);
    expect(new WorkWithdrawnError('ns/a', 'why').message).to.equal('work on Kyma ns/a withdrawn: why');
  });

  it('passes on a run’s own failure and result, and withdraws only the key asked for', async () => {
    const runs = new Runs();
    const failing = runs.start('ns/a', () => Promise.reject(new Error('SKR said no')));
    expect(await failing.catch((error: Error) => error.message)).to.equal('SKR said no');
    const other = hungRun();
    const kept = runs.start('ns/b', other.work);
    runs.withdraw('ns/a', 'gone');
    other.finish('done');
    expect(await kept).to.equal('done');
  });

  it('lets a handover wait for every run of the key in flight, however they end', async () => {
    const runs = new Runs();
    const first = hungRun();
    const second = hungRun();
    void runs.start('ns/a', first.work);
    void runs.start('ns/a', second.work).catch(() => {});
    let settled = false;
    const waiting = runs.settled('ns/a').then(() => (settled = true));
    first.finish('one');
    await new Promise((resolve) => setImmediate(resolve));
    expect(settled, 'one run still going').to.equal(false);
    second.fail(new Error('SKR unreachable'));
    await waiting;
    expect(runs.idle).to.equal(true);
  });

  it('journals each start and end as a JSON line with replica and monotonic time', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'shard-runs-'));
    try {
      const file = join(dir, 'journal.jsonl');
      const runs = new Runs(fileJournal(file, 'agent-a'));
      await runs.start('ns/a', () => Promise.resolve('x'));
      const lines = (await readFile(file, 'utf8'))
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { kyma: string; replica: string; phase: string; t: string });
      expect(lines.map((l) => [l.kyma, l.replica, l.phase])).to.deep.equal([
        ['ns/a', 'agent-a', 'start'],
        ['ns/a', 'agent-a', 'end'],
      ]);
      expect(BigInt((lines[1] as { t: string }).t) >= BigInt((lines[0] as { t: string }).t)).to.equal(true);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
