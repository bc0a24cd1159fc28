import { describe, it } from 'mocha';
import { expect } from 'chai';
import fc from 'fast-check';
import {
  applyRotationStep,
  decideLeaf,
  needsReissue,
  needsRenewal,
  nextRotationStep,
  rotationStateFromAnnotations,
  rotationStateToAnnotations,
  signingCaFor,
  RENEW_BEFORE_MS,
  ROTATION_ANNOTATIONS,
  ROTATION_PHASES,
  type RotationState,
} from '../src/index.js';

const DAY_MS = 24 * 3600_000;
const T0 = new Date('2026-03-01T00:00:00Z');
const at = (ms: number) => new Date(T0.getTime() + ms);

describe('pki: renewal and re-issue policy', function () {
  it('renews with exactly 30 days left, not one second earlier', function () {
    const leaf = { notBefore: T0, notAfter: at(60 * DAY_MS) };
    expect(needsRenewal(leaf, at(30 * DAY_MS))).to.equal(true);
    expect(needsRenewal(leaf, at(30 * DAY_MS - 1000))).to.equal(false);
    expect(needsRenewal(leaf, at(60 * DAY_MS + 1))).to.equal(true);
  });

  it('re-issues a leaf issued one second before its CA joined the bundle, not one issued at that second', function () {
    const joined = at(10 * DAY_MS);
    expect(needsReissue({ notBefore: at(10 * DAY_MS - 1000) }, joined)).to.equal(true);
    expect(needsReissue({ notBefore: joined }, joined)).to.equal(false);
    expect(needsReissue({ notBefore: at(10 * DAY_MS + 1000) }, joined)).to.equal(false);
    // notBefore has whole seconds: a leaf issued 400 ms after a join at .600 shows the join's second.
    expect(needsReissue({ notBefore: at(10 * DAY_MS) }, at(10 * DAY_MS + 600))).to.equal(false);
    expect(needsReissue({ notBefore: at(10 * DAY_MS - 1000) }, at(10 * DAY_MS + 600))).to.equal(true);
  });

  it('renewal is monotonic in time: once needed, needed at every later instant', function () {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 200 * DAY_MS }),
        fc.integer({ min: 0, max: 200 * DAY_MS }),
        (a, b) => {
          const leaf = { notBefore: T0, notAfter: at(60 * DAY_MS) };
          const [early, late] = a <= b ? [a, b] : [b, a];
          if (needsRenewal(leaf, at(early))) expect(needsRenewal(leaf, at(late))).to.equal(true);
          expect(needsRenewal(leaf, at(early))).to.equal(60 * DAY_MS - early <= RENEW_BEFORE_MS);
        },
      ),
    );
  });

  it('decides one action per leaf, re-issue first', function () {
    const leaf = { notBefore: T0, notAfter: at(60 * DAY_MS) };
    expect(decideLeaf(leaf, { now: at(DAY_MS) }).action).to.equal('none');
    expect(decideLeaf(leaf, { now: at(31 * DAY_MS) }).action).to.equal('renew');
    expect(decideLeaf(leaf, { now: at(61 * DAY_MS) })).to.deep.equal({ action: 'renew', reason: 'expired' });
    expect(decideLeaf(leaf, { now: at(DAY_MS), currentCaInBundleSince: at(1000) }).action).to.equal(
      'reissue',
    );
    expect(decideLeaf(leaf, { now: at(DAY_MS), signedByCurrentCa: false }).action).to.equal('reissue');
  });
});

describe('pki: CA rotation state machine', function () {
  const grace = 3600_000;

  function run(state: RotationState, now: Date, leavesOnOldCa = 0, propagationMs = 0) {
    const step = nextRotationStep(state, { now, gracePeriodMs: grace, propagationMs, leavesOnOldCa });
    return { step, state: applyRotationStep(state, step, now) };
  }

  it('walks none → pending → trusted → reissued → switched → (grace) → complete', function () {
    let state: RotationState = { phase: 'none' };
    const kinds: string[] = [];
    for (const ms of [0, 1000, 2000, 3000]) {
      const r = run(state, at(ms));
      kinds.push(r.step.kind);
      state = r.state;
    }
    expect(kinds).to.deep.equal(['start', 'trust-new-ca', 'reissue-leaves', 'switch-signing']);
    expect(state.phase).to.equal('signing-switched');
    expect(run(state, at(3000 + grace - 1)).step).to.deep.equal({
      kind: 'wait',
      until: at(3000 + grace),
      for: 'grace-period',
    });
    const done = run(state, at(3000 + grace));
    expect(done.step.kind).to.equal('drop-old-ca');
    expect(done.state).to.include({ phase: 'complete' });
    expect(run(done.state, at(4 * grace)).step.kind).to.equal('done');
    expect(
      nextRotationStep(done.state, { now: at(0), gracePeriodMs: 0, leavesOnOldCa: 0, startNew: true }).kind,
    ).to.equal('start');
  });

  it('re-issues no leaf before the new CA has been in the bundle for the propagation delay', function () {
    const propagation = 120_000;
    const trusted = run(run({ phase: 'none' }, at(0)).state, at(1000), 0, propagation).state;
    expect(trusted).to.include({ phase: 'new-ca-trusted' });
    expect(run(trusted, at(1000), 0, propagation).step).to.deep.equal({
      kind: 'wait',
      until: at(1000 + propagation),
      for: 'propagation',
    });
    const waiting = run(trusted, at(1000 + propagation - 1), 0, propagation);
    expect(waiting.step.kind).to.equal('wait');
    expect(waiting.state).to.deep.equal(trusted);
    const reissued = run(trusted, at(1000 + propagation), 0, propagation);
    expect(reissued.step.kind).to.equal('reissue-leaves');
    expect(reissued.state).to.include({ phase: 'leaves-reissued' });
  });

  it('re-issues stragglers after the switch and restarts the grace period from that re-issue', function () {
    const switched: RotationState = { phase: 'signing-switched', switchedAt: at(0), reissuedAt: at(-1000) };
    const straggler = run(switched, at(2 * grace), 3);
    expect(straggler.step.kind).to.equal('reissue-leaves');
    expect(straggler.state.phase).to.equal('signing-switched');
    expect(run(straggler.state, at(2 * grace + 1000)).step.kind).to.equal('wait');
    expect(run(straggler.state, at(3 * grace)).step.kind).to.equal('drop-old-ca');
  });

  it('never signs with the new CA before it propagated, nor drops the old CA before every leaf moved and the grace period passed, whatever the clock does', function () {
    fc.assert(
      fc.property(
        fc.array(fc.record({ advance: fc.integer({ min: 0, max: 2 * grace }), stragglers: fc.nat(3) }), {
          minLength: 1,
          maxLength: 30,
        }),
        fc.integer({ min: 0, max: 2 * grace }),
        (ticks, propagation) => {
          let state: RotationState = { phase: 'none' };
          let now = 0;
          for (const tick of ticks) {
            now += tick.advance;
            const { step, state: next } = run(state, at(now), tick.stragglers, propagation);
            if (step.kind === 'reissue-leaves' && state.phase === 'new-ca-trusted') {
              // No leaf is signed by the new CA before every holder of the bundle can have loaded it.
              expect(now + T0.getTime() - state.trustedAt!.getTime()).to.be.at.least(propagation);
            }
            if (step.kind === 'drop-old-ca') {
              expect(tick.stragglers).to.equal(0);
              const since = Math.max(state.switchedAt!.getTime(), state.reissuedAt!.getTime());
              expect(now + T0.getTime() - since).to.be.at.least(grace);
            }
            state = next;
          }
        },
      ),
    );
  });

  it('round-trips any state through annotations', function () {
    const instant = fc.date({
      min: new Date('2000-01-01T00:00:00Z'),
      max: new Date('2100-01-01T00:00:00Z'),
      noInvalidDate: true,
    });
    fc.assert(
      fc.property(
        fc.record(
          {
            phase: fc.constantFrom(...ROTATION_PHASES),
            startedAt: instant,
            trustedAt: instant,
            reissuedAt: instant,
            switchedAt: instant,
            completedAt: instant,
          },
          { requiredKeys: ['phase'] },
        ),
        (state) => {
          const annotations = Object.fromEntries(
            Object.entries(rotationStateToAnnotations(state)).filter(
              (e): e is [string, string] => e[1] !== null,
            ),
          );
          expect(rotationStateFromAnnotations(annotations)).to.deep.equal(state);
        },
      ),
    );
  });

  it('persists through annotations: a resumed run sees the same state', function () {
    const state: RotationState = {
      phase: 'signing-switched',
      startedAt: at(0),
      trustedAt: at(1000),
      switchedAt: at(5000),
    };
    const annotations = Object.fromEntries(
      Object.entries(rotationStateToAnnotations(state)).filter((e): e is [string, string] => e[1] !== null),
    );
    expect(rotationStateFromAnnotations(annotations)).to.deep.equal(state);
    expect(rotationStateFromAnnotations(undefined)).to.deep.equal({ phase: 'none' });
    expect(() => rotationStateFromAnnotations({ [ROTATION_ANNOTATIONS.phase]: 'bogus' })).to.throw(
      /unknown rotation phase/,
    );
    expect(() =>
      rotationStateFromAnnotations({
        [ROTATION_ANNOTATIONS.phase]: 'complete',
        [ROTATION_ANNOTATIONS.startedAt]: 'yesterday',
      }),
    ).to.throw(/started-at.*RFC 3339/);
  });
});

describe('pki: which CA signs during a rotation (signingCaFor)', function () {
  const current = { certPem: 'current-ca', keyPem: 'current-key' };
  const pending = { certPem: 'pending-ca', keyPem: 'pending-key' };

  it('signs with the pending CA only in phase leaves-reissued, and with the current one in every other phase', function () {
    for (const phase of ROTATION_PHASES) {
      const expected = phase === 'leaves-reissued' ? pending : current;
      expect(signingCaFor({ current, pending }, { phase }), phase).to.equal(expected);
    }
  });

  it('keeps the current CA when the phase says leaves-reissued but no pending CA is stored', function () {
    expect(signingCaFor({ current }, { phase: 'leaves-reissued' })).to.equal(current);
  });

  it('reads the phase from the CA Secret annotations when no state is given', function () {
    const annotations = rotationStateToAnnotations({ phase: 'leaves-reissued', reissuedAt: T0 });
    const stored = Object.fromEntries(
      Object.entries(annotations).filter((entry): entry is [string, string] => entry[1] !== null),
    );
    expect(signingCaFor({ current, pending, annotations: stored })).to.equal(pending);
    expect(signingCaFor({ current, pending, annotations: {} })).to.equal(current);
    expect(() =>
      signingCaFor({ current, pending, annotations: { [ROTATION_ANNOTATIONS.phase]: 'half-done' } }),
    ).to.throw(/unknown rotation phase "half-done"/);
  });
});
