// A dropped event as a user sees it: counted by reason, told to the metrics, and a warn line that names the
// object; a burst of drops writes one line a second per reason, and the flush counts the lines left out.
import { expect } from 'chai';
import type { WatchEventV2 } from '@skr-watcher/api';
import { createLogger } from '@skr-watcher/telemetry';
import { DropReport } from '../src/dispatch/drops.js';
import { emptyDispatchStats, type DispatchObserver, type DropReason } from '../src/dispatch/observer.js';
import { ManualClock } from '../../test/support/manual-clock.js';

interface Line {
  msg: string;
  level: string;
  suppressed?: number;
  [field: string]: unknown;
}

function event(name: string): WatchEventV2 {
  return {
    watched: { Namespace: 'kyma-system', Name: name },
    watchedGvk: { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Sample' },
  };
}

function setup() {
  const clock = new ManualClock();
  const lines: Line[] = [];
  const logger = createLogger('test', 'warn', { write: (line: string) => void lines.push(JSON.parse(line)) });
  const stats = emptyDispatchStats();
  const observed: DropReason[] = [];
  const observer: DispatchObserver = {
    enqueued: () => {},
    coalesced: () => {},
    delivered: () => {},
    dropped: (reason) => void observed.push(reason),
    depth: () => {},
    attempt: () => {},
  };
  const report = new DropReport({ stats, observer, logger, clock, maxQueue: 7 });
  return { clock, lines, stats, observed, report };
}

describe('DropReport', () => {
  it('counts a drop, tells the observer, and writes a line naming the object, its uid and the reason', () => {
    const { lines, stats, observed, report } = setup();
    report.report('rejected', { manager: 'm', event: event('a'), uid: 'uid-1' }, 2, {
      status: 422,
      why: 'HTTP 422',
    });
    expect(stats.dropped.rejected).to.equal(1);
    expect(observed).to.deep.equal(['rejected']);
    expect(lines).to.have.length(1);
    expect(lines[0]).to.deep.include({
      level: 'warn',
      msg: 'event dropped: rejected',
      manager: 'm',
      gvk: 'operator.kyma-project.io/v1alpha1/Sample',
      namespace: 'kyma-system',
      name: 'a',
      uid: 'uid-1',
      reason: 'rejected',
      attempts: 2,
      status: 422,
      why: 'HTTP 422',
      suppressed: 0,
    });
  });

  it('writes the queue bound on queue_full lines only', () => {
    const { lines, report } = setup();
    report.report('queue_full', { manager: 'm', event: event('a') }, 0);
    report.report('invalid', { manager: 'm', event: event('b') }, 0, { why: 'no name' });
    expect(lines[0]).to.deep.include({ msg: 'event dropped: dispatch queue full', maxQueue: 7 });
    expect(lines[1]).to.not.have.property('maxQueue');
    expect(lines[1]).to.deep.include({ msg: 'event dropped: invalid', why: 'no name' });
  });

  it('writes one line a second per reason in a burst, and the flush counts the rest', async () => {
    const { clock, lines, stats, report } = setup();
    for (let i = 0; i < 500; i++) report.report('shutdown', { manager: 'm', event: event(`obj-${i}`) }, 0);
    report.report('max_age', { manager: 'm', event: event('old') }, 3);
    expect(stats.dropped.shutdown).to.equal(500);
    expect(lines.map((line) => line.msg)).to.deep.equal([
      'event dropped: shutdown',
      'event dropped: max age',
    ]);
    await clock.advance(1_000);
    report.report('shutdown', { manager: 'm', event: event('after-a-second') }, 0);
    expect(lines.at(-1)).to.deep.include({ name: 'after-a-second', suppressed: 499 });
    report.report('shutdown', { manager: 'm', event: event('last') }, 0);
    report.flush();
    expect(lines.at(-1)).to.deep.include({ name: 'last', suppressed: 1 });
    expect(lines).to.have.length(4);
  });
});
