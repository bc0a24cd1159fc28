// KCP's reachability as the metrics and the log see it: one warn line and one breaker metric per outage however
// many probes fail, and one line when KCP answers again, which lets what backed off go at once.
import { expect } from 'chai';
import { createLogger } from '@skr-watcher/telemetry';
import { KcpBreaker } from '../src/dispatch/breaker.js';
import type { DispatchObserver } from '../src/dispatch/observer.js';
import type { DeliveryOutcome } from '../src/dispatch/outcome.js';
import { KcpReachability } from '../src/dispatch/reachability.js';
import { ManualClock } from '../../test/support/manual-clock.js';

const REFUSED: DeliveryOutcome = { result: 'retry', reason: 'connect ECONNREFUSED' };
const GATEWAY: DeliveryOutcome = { result: 'retry', reason: 'HTTP 502', status: 502 };
const BUSY: DeliveryOutcome = { result: 'retry', reason: 'HTTP 503', status: 503, retryAfterMs: 1_000 };
const DELIVERED: DeliveryOutcome = { result: 'delivered', status: 202 };
const REJECTED: DeliveryOutcome = { result: 'rejected', reason: 'HTTP 400', status: 400 };

function setup(level: 'info' | 'debug' = 'info') {
  const clock = new ManualClock();
  const lines: { level: string; msg: string; [field: string]: unknown }[] = [];
  const logger = createLogger('test', level, { write: (line: string) => void lines.push(JSON.parse(line)) });
  const breaker = new KcpBreaker({ threshold: 2, clock, delayMs: () => 5_000, eagerIntervalMs: 100 });
  const transitions: boolean[] = [];
  const observer: DispatchObserver = {
    enqueued: () => {},
    coalesced: () => {},
    delivered: () => {},
    dropped: () => {},
    depth: () => {},
    attempt: () => {},
    breaker: (open) => void transitions.push(open),
  };
  let released = 0;
  const reachability = new KcpReachability({
    breaker,
    logger,
    observer,
    queued: () => 42,
    onReachable: () => void released++,
  });
  return { clock, lines, breaker, transitions, reachability, released: () => released };
}

describe('KcpReachability', () => {
  it('opens the breaker after the threshold with one warn line that says why and how many wait', () => {
    const { lines, breaker, transitions, reachability } = setup();
    reachability.note(REFUSED, false);
    expect(breaker.state).to.equal('closed');
    reachability.note(GATEWAY, false);
    expect(breaker.state).to.equal('open');
    expect(transitions).to.deep.equal([true]);
    expect(lines).to.have.length(1);
    expect(lines[0]).to.deep.include({
      level: 'warn',
      msg: 'KCP unreachable; holding callbacks and probing with one at a time',
      queued: 42,
      probeInMs: 5_000,
      reason: 'HTTP 502',
    });
  });

  it('writes failed probes as debug lines, not further warnings', async () => {
    const { clock, lines, breaker, transitions, reachability } = setup('debug');
    reachability.note(REFUSED, false);
    reachability.note(REFUSED, false);
    for (let probe = 0; probe < 3; probe++) {
      await clock.advance(5_000);
      expect(breaker.acquire()).to.equal('probe');
      reachability.note(REFUSED, true);
    }
    expect(transitions).to.deep.equal([true]);
    expect(lines.filter((line) => line.level === 'warn')).to.have.length(1);
    expect(lines.filter((line) => line.msg === 'KCP still unreachable')).to.have.length(3);
  });

  it('closes on any answer of KCP, releases what backed off, and says so once', async () => {
    const { clock, lines, breaker, transitions, reachability, released } = setup();
    reachability.note(REFUSED, false);
    reachability.note(REFUSED, false);
    await clock.advance(5_000);
    expect(breaker.acquire()).to.equal('probe');
    reachability.note(REJECTED, true);
    expect(breaker.state).to.equal('closed');
    expect(transitions).to.deep.equal([true, false]);
    expect(released()).to.equal(1);
    reachability.note(DELIVERED, false);
    expect(released(), 'nothing to release while closed').to.equal(1);
    expect(lines.at(-1)).to.deep.include({ msg: 'KCP reachable again; callbacks resume', queued: 42 });
    expect(lines).to.have.length(2);
  });

  it('takes a 503 with Retry-After as KCP answering, not as an outage', () => {
    const { breaker, transitions, lines, reachability } = setup();
    for (let i = 0; i < 5; i++) reachability.note(BUSY, false);
    expect(breaker.state).to.equal('closed');
    expect(transitions).to.deep.equal([]);
    expect(lines).to.deep.equal([]);
  });
});
