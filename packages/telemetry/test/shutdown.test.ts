import { expect } from 'chai';
import { createLogger, createShutdown } from '../src/index.js';

describe('telemetry shutdown', () => {
  it('runs steps last-registered first, goes on after a failing step, and logs that step by name', async () => {
    const written: string[] = [];
    const logger = createLogger('test', 'info', { write: (line: string) => void written.push(line) });
    const shutdown = createShutdown({ logger, exit: false });
    const order: string[] = [];
    shutdown.add('queue', async () => void order.push('queue'));
    shutdown.add('broken', async () => {
      order.push('broken');
      throw new Error('disk gone');
    });
    shutdown.add('server', async () => void order.push('server'));
    expect(shutdown.stopping).to.equal(false);
    await shutdown.run('test');
    expect(order).to.deep.equal(['server', 'broken', 'queue']);
    expect(shutdown.stopping).to.equal(true);
    const failed = written.map((line) => JSON.parse(line) as Record<string, unknown>).find((l) => l['step']);
    expect(failed).to.include({ step: 'broken', msg: 'shutdown step failed', level: 'error' });
  });

  it('runs its steps once, however often it is asked', async () => {
    const shutdown = createShutdown({ logger: createLogger('test', 'silent'), exit: false });
    let runs = 0;
    shutdown.add('count', async () => void runs++);
    await Promise.all([shutdown.run('SIGTERM'), shutdown.run('SIGINT')]);
    await shutdown.run('again');
    expect(runs).to.equal(1);
  });
});
