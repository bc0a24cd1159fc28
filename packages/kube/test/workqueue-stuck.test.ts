// controller-runtime's stuck-worker gauges on the work queue (decision 023): a run in flight shows in
// workqueue_longest_running_processor_seconds and workqueue_unfinished_work_seconds until it ends.
import { expect } from 'chai';
import { createRegistry } from '@skr-watcher/telemetry';
import { registerStuckWorkerGauges } from '../src/workqueue/metrics.js';
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

  it('add up the runs of queues of one name, and drop a queue that left', async () => {
    const registry = createRegistry();
    const leaveFirst = registerStuckWorkerGauges(registry, { name: 'kymas', runAges: () => [1, 2] });
    registerStuckWorkerGauges(registry, { name: 'kymas', runAges: () => [5] });
    registerStuckWorkerGauges(registry, { name: 'idle', runAges: () => [] });
    const value = (text: string, metric: string, name: string) =>
      Number(new RegExp(`^${metric}\\{name="${name}"\\} (\\S+)$`, 'm').exec(text)?.[1]);
    const both = await registry.metrics();
    expect(value(both, 'workqueue_longest_running_processor_seconds', 'kymas')).to.equal(5);
    expect(value(both, 'workqueue_unfinished_work_seconds', 'kymas')).to.equal(8);
    expect(value(both, 'workqueue_longest_running_processor_seconds', 'idle')).to.equal(0);
    expect(value(both, 'workqueue_unfinished_work_seconds', 'idle')).to.equal(0);
    leaveFirst();
    const one = await registry.metrics();
    expect(value(one, 'workqueue_longest_running_processor_seconds', 'kymas')).to.equal(5);
    expect(value(one, 'workqueue_unfinished_work_seconds', 'kymas')).to.equal(5);
  });
});
