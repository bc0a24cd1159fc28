// What the targeted drift revert counts as drift (the SKR's object against what the module sets: drift.ts holds), and
// how reverts of one object are paced (DriftStreaks) and what their Events say.
import { expect } from 'chai';
import { DRIFT_PACING, DriftStreaks, holds, revertMessage } from '../src/targeted/drift.js';

const SECOND = 1_000;
const pacing = { ...DRIFT_PACING, maxObjects: 3 };

describe('drift: the SKR object holds what the module sets', () => {
  const wanted = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'op', labels: { 'operator.kyma-project.io/managed-by': 'kyma' } },
    spec: { replicas: 1, template: { spec: { containers: [{ name: 'op', image: 'op:1' }] } } },
  };
  const live = {
    ...wanted,
    metadata: {
      ...wanted.metadata,
      uid: 'u',
      resourceVersion: '9',
      annotations: { 'deployment.kubernetes.io/revision': '2' },
    },
    spec: {
      replicas: 1,
      strategy: { type: 'RollingUpdate' },
      template: { spec: { containers: [{ name: 'op', image: 'op:1', imagePullPolicy: 'IfNotPresent' }] } },
    },
    status: { replicas: 1 },
  };

  it('defaults, status and fields the module does not set are no drift', () => {
    expect(holds(live, wanted)).to.equal(true);
    // `data: {}` reads back as nothing (omitempty).
    expect(holds({ kind: 'ConfigMap' }, { kind: 'ConfigMap', data: {} })).to.equal(true);
  });

  it('a changed value, a removed label, a removed or added list element are drift', () => {
    expect(holds({ ...live, spec: { ...live.spec, replicas: 3 } }, wanted)).to.equal(false);
    expect(holds({ ...live, metadata: { ...live.metadata, labels: {} } }, wanted)).to.equal(false);
    const containers = (list: unknown[]) => ({
      ...live,
      spec: { ...live.spec, template: { spec: { containers: list } } },
    });
    expect(holds(containers([]), wanted)).to.equal(false);
    expect(holds(containers([{ name: 'op', image: 'op:1' }, { name: 'x' }]), wanted)).to.equal(false);
  });

  it('compares objects nested 20,000 levels deep without overflowing the stack', () => {
    const deep = (leaf: string) => {
      let value: unknown = leaf;
      for (let i = 0; i < 20_000; i++) value = { x: value };
      return value;
    };
    expect(holds(deep('a'), deep('a'))).to.equal(true);
    expect(holds(deep('a'), deep('b'))).to.equal(false);
  });
});

describe('drift pacing: targeted reverts of one object back off (DriftStreaks)', () => {
  it('reverts at once, then 1 s, 2 s, 4 s … apart up to 5 min; callbacks in between are deferred and folded', () => {
    const streaks = new DriftStreaks(pacing);
    let now = 0;
    const reverts: number[] = [];
    let deferred = 0;
    // A writer every 250 ms for 20 minutes: each admitted callback is put back.
    for (; now < 20 * 60 * SECOND; now += 250) {
      if (!streaks.admit('cm', now)) {
        deferred += 1;
        continue;
      }
      reverts.push(now);
      streaks.reverted('cm', now);
    }
    const gaps = reverts.slice(1).map((at, index) => at - reverts[index]!);
    expect(gaps.slice(0, 9)).to.deep.equal([1, 2, 4, 8, 16, 32, 64, 128, 256].map((s) => s * SECOND));
    expect(new Set(gaps.slice(9))).to.deep.equal(new Set([DRIFT_PACING.maxMs]));
    // 4,800 writes cost 12 targeted reverts.
    expect(reverts.length).to.equal(12);
    expect(deferred + reverts.length).to.equal(4_800);
  });

  it('with a first window of 0 (--drift-revert-backoff 0) puts every write back at once', () => {
    const streaks = new DriftStreaks({ ...pacing, initialMs: 0 });
    for (let now = 0; now < 10 * SECOND; now += 10) {
      expect(streaks.admit('cm', now), `at ${now} ms`).to.equal(true);
      streaks.reverted('cm', now);
    }
  });

  it('an Event folds the callbacks deferred since the last one; quiet for 10 minutes, the next edit is at once', () => {
    const streaks = new DriftStreaks(pacing);
    expect(streaks.admit('cm', 0)).to.equal(true);
    expect(streaks.reverted('cm', 0)).to.deep.include({ first: true, writes: 1 });
    for (let at = 100; at < SECOND; at += 100) expect(streaks.admit('cm', at)).to.equal(false);
    expect(streaks.admit('cm', SECOND)).to.equal(true);
    const fold = streaks.reverted('cm', SECOND + 40);
    expect(fold).to.deep.equal({ first: false, writes: 10, sinceMs: SECOND + 40, nextInMs: 2 * SECOND - 40 });
    expect(revertMessage('ConfigMap ns/cm', 'kcp-system/m', false, fold)).to.equal(
      "ConfigMap ns/cm was changed in the SKR 10 times in the last 1s; put back as Manifest kcp-system/m installs it. Something in the SKR keeps changing it: its next targeted revert waits 2s, the Kyma's full pass puts it back meanwhile",
    );
    // Still fighting 9 minutes later: deferred no more (its window passed), but the streak goes on.
    expect(streaks.admit('cm', SECOND + 9 * 60 * SECOND)).to.equal(true);
    expect(streaks.reverted('cm', SECOND + 9 * 60 * SECOND).first).to.equal(false);
    // Then quiet for the quiet period: a fresh streak, put back at once with the single-revert Event.
    const later = SECOND + 9 * 60 * SECOND + DRIFT_PACING.quietMs;
    expect(streaks.admit('cm', later)).to.equal(true);
    expect(streaks.reverted('cm', later).first).to.equal(true);
  });

  it('keeps at most maxObjects streaks, forgetting the one seen least recently, and drops quiet ones', () => {
    const streaks = new DriftStreaks(pacing);
    for (const [index, key] of ['a', 'b', 'c', 'd'].entries()) streaks.reverted(key, index);
    expect(streaks.size).to.equal(3);
    // `a` was forgotten: put back at once; `d` is in its window.
    expect(streaks.admit('a', 10)).to.equal(true);
    expect(streaks.admit('d', 10)).to.equal(false);
    streaks.reverted('e', DRIFT_PACING.quietMs + 10);
    expect(streaks.size).to.equal(1);
  });
});
