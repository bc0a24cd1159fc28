// Broken-watcher detection as a state machine over an injected clock: quiet → probe → broken, and a broken webhook
// stays broken for passes that happen while the next probe is out (a Kyma edit wakes the Kyma at any time).
import { expect } from 'chai';
import { createWatcherHealth } from '../src/registration/watcher-health.js';

const at = (ms: number) => new Date(Date.UTC(2026, 0, 1) + ms);

describe('watcher health', () => {
  const options = { quietAfterMs: 2_000, probeTimeoutMs: 4_000 };

  it('probes a quiet SKR and calls it healthy once an event answers the probe', () => {
    const health = createWatcherHealth(options);
    health.recordEvent('r1', at(0));
    expect(health.assess('r1', at(1_000)).kind).to.equal('healthy');
    expect(health.assess('r1', at(2_500))).to.deep.equal({ kind: 'probe', timeoutMs: 4_000 });
    health.recordProbe('r1', at(2_500));
    expect(health.assess('r1', at(3_000))).to.deep.equal({ kind: 'waiting', afterMs: 3_500 });
    health.recordEvent('r1', at(3_100));
    expect(health.assess('r1', at(3_200)).kind).to.equal('healthy');
  });

  it('keeps a webhook broken for passes during the next probe, until an event arrives', () => {
    const health = createWatcherHealth(options);
    health.recordProbe('r1', at(0));
    const broken = health.assess('r1', at(4_000));
    expect(broken.kind).to.equal('broken');
    health.recordProbe('r1', at(4_000));
    // A pass woken by an edit while the second probe is out: still broken, with the first probe's finding.
    const during = health.assess('r1', at(5_000));
    expect(during).to.deep.equal({
      kind: 'waiting',
      afterMs: 3_000,
      broken: broken.kind === 'broken' ? broken.message : '',
    });
    health.recordEvent('r1', at(6_000));
    expect(health.assess('r1', at(6_500)).kind).to.equal('healthy');
    // Healthy again: the next quiet spell starts clean.
    health.recordProbe('r1', at(9_000));
    expect(health.assess('r1', at(9_500))).to.deep.equal({ kind: 'waiting', afterMs: 3_500 });
  });

  it('forgets a runtime entirely', () => {
    const health = createWatcherHealth(options);
    health.recordProbe('r1', at(0));
    health.assess('r1', at(4_000));
    health.forget('r1');
    expect(health.assess('r1', at(4_100))).to.deep.equal({ kind: 'probe', timeoutMs: 4_000 });
  });
});
