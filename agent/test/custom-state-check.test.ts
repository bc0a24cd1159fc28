// customStateCheck with upstream's former rules, on an injected clock.
import { expect } from 'chai';
import { checkState, StateCheckError, type StateCheck } from '../src/rollout/custom-state-check.js';

const NOW = new Date('2026-11-26T12:00:00Z');
const minutesAgo = (m: number) => new Date(NOW.getTime() - m * 60_000);
const CHECKS: StateCheck[] = [
  { jsonPath: 'status.health', value: 'green', mappedState: 'Ready' },
  { jsonPath: 'status.replicas.ready', value: '3', mappedState: 'Ready' },
  { jsonPath: 'status.health', value: 'red', mappedState: 'Error' },
  { jsonPath: '.status.degraded', value: 'true', mappedState: 'Warning' },
];
const cr = (status: unknown) => ({ apiVersion: 'x/v1', kind: 'X', status });

describe('customStateCheck', () => {
  it('maps Ready only when every Ready check holds (numbers compared as printed)', () => {
    expect(checkState(cr({ health: 'green', replicas: { ready: 3 } }), CHECKS, NOW, undefined)).to.deep.equal(
      {
        state: 'Ready',
        reason: 'status.health is "green" and status.replicas.ready is "3"',
      },
    );
    expect(
      checkState(cr({ health: 'green', replicas: { ready: 2 } }), CHECKS, NOW, undefined).state,
    ).to.equal('Processing');
  });

  it('maps Error and Warning, Error first, Ready before Warning', () => {
    expect(checkState(cr({ health: 'red', degraded: true }), CHECKS, NOW, undefined).state).to.equal('Error');
    expect(checkState(cr({ degraded: true }), CHECKS, NOW, undefined).state).to.equal('Warning');
    expect(
      checkState(cr({ health: 'green', replicas: { ready: 3 }, degraded: true }), CHECKS, NOW, undefined)
        .state,
    ).to.equal('Ready');
  });

  it('is Processing without a mapped state, and Warning after 5 minutes of that', () => {
    expect(checkState(cr({}), CHECKS, NOW, minutesAgo(4)).state).to.equal('Processing');
    expect(checkState(cr(undefined), CHECKS, NOW, minutesAgo(5))).to.deep.equal({
      state: 'Warning',
      reason: 'no mapped state for 5 min',
    });
  });

  it('reads status.state when the template sets no customStateCheck', () => {
    expect(checkState(cr({ state: 'Ready' }), undefined, NOW, undefined).state).to.equal('Ready');
    expect(checkState(cr({ state: 'Deleting' }), [], NOW, undefined).state).to.equal('Deleting');
    expect(checkState(cr({ state: 'Bogus' }), undefined, NOW, undefined).state).to.equal('Processing');
  });

  it('refuses checks without both Ready and Error, or with a path that is not a field path', () => {
    const onlyReady = CHECKS.filter((check) => check.mappedState !== 'Error');
    expect(() => checkState(cr({}), onlyReady, NOW, undefined)).to.throw(StateCheckError, /Error/);
    expect(() =>
      checkState(
        cr({}),
        [...CHECKS, { jsonPath: 'status..x', value: '1', mappedState: 'Ready' }],
        NOW,
        undefined,
      ),
    ).to.throw(StateCheckError, /dotted field path/);
  });
});
