// controller-runtime's stuck-worker gauges on the work queue (decision 023): a run in flight shows in
// workqueue_longest_running_processor_seconds and workqueue_unfinished_work_seconds until it ends.
import { expect } from 'chai';
import { createRegistry } from '@skr-watcher/telemetry';
import { WorkQueue } from '../src/workqueue.js';

describe('work queue stuck-worker gauges', () => {
  it('report how long runs in flight have been going, and zero once they end', async () => {
    const registry = createRegistry();
    let release: () => void = () => {};
    const started = new Promise<void>((resolveStarted) => {
      const queue = new WorkQueue({
        name: 'stuck',
        workers: 2,
        registry,
        process: () =>
          new Promise<void>((resolve) => {
            resolveStarted();
            release = resolve;
          }),
      });
      queue.start();
      queue.add('a');
      after(() => queue.stop());
    });
    await started;
    await new Promise((resolve) => setTimeout(resolve, 300));
    const value = (text: string, name: string) =>
      Number(new RegExp(`^${name}\\{name="stuck"\\} (\\S+)$`, 'm').exec(text)?.[1]);
    const during = await registry.metrics();
    expect(value(during, 'workqueue_longest_running_processor_seconds')).to.be.at.least(0.25);
    expect(value(during, 'workqueue_unfinished_work_seconds')).to.be.at.least(0.25);
    release();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const afterwards = await registry.metrics();
    expect(value(afterwards, 'workqueue_longest_running_processor_seconds')).to.equal(0);
    expect(value(afterwards, 'workqueue_unfinished_work_seconds')).to.equal(0);
  });
});
