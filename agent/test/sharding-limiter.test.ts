// The bound on concurrent label writes: never more than the limit in flight, the rest in the order they came.
import { expect } from 'chai';
import { limiter } from '../src/sharding/limiter.js';

describe('limiter', () => {
  it('runs at most `limit` tasks at once and starts the waiting ones in order as others end', async () => {
    const run = limiter(2);
    let active = 0;
    let most = 0;
    const started: number[] = [];
    const gates: (() => void)[] = [];
    const tasks = [0, 1, 2, 3, 4].map((i) =>
      run(async () => {
        started.push(i);
        active += 1;
        most = Math.max(most, active);
        await new Promise<void>((resolve) => gates.push(resolve));
        active -= 1;
        return i * 10;
      }),
    );
    await new Promise((resolve) => setImmediate(resolve));
    expect(started).to.deep.equal([0, 1]);
    while (gates.length > 0 || started.length < 5) {
      gates.shift()?.();
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(await Promise.all(tasks)).to.deep.equal([0, 10, 20, 30, 40]);
    expect(started).to.deep.equal([0, 1, 2, 3, 4]);
    expect(most).to.equal(2);
  });

  it('frees the slot of a task that fails and passes its error on', async () => {
    const run = limiter(1);
    const failed = run(() => Promise.reject(new Error('conflict')));
    const next = run(() => Promise.resolve('next'));
    expect(await failed.catch((error: Error) => error.message)).to.equal('conflict');
    expect(await next).to.equal('next');
  });
});
