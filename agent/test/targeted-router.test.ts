// The router of the targeted paths: for each result of a path, whether the Kyma's full pass follows now, after the
// window, or not at all, as the table in targeted/router.ts states it. The paths here answer as told; what they do
// on real planes is module-mirror.test.ts's, drift-backoff.test.ts's and sync-resource-targeted.test.ts's.
import { expect } from 'chai';
import { MODULE_MIRROR, type ChangeFingerprint } from '@skr-watcher/api';
import { silentLogger } from '@skr-watcher/telemetry';
import type { AcceptedEvent } from '../src/listener/index.js';
import type { ObjectChangeResult } from '../src/targeted/paths.js';
import { createTargetedRouter, type FullPassTrigger } from '../src/targeted/router.js';
import type { SyncResourceApplyOutcome } from '../src/reconcile/index.js';

const KEY = 'kcp-system/k';
const FINGERPRINT: ChangeFingerprint = { uid: 'u', generation: 2, previousResourceVersion: '7' };

function callback(fingerprint?: ChangeFingerprint): AcceptedEvent {
  return {
    runtimeId: 'r',
    gvk: { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Sample' },
    watched: { namespace: 'kyma-system', name: 'sample' },
    receivedAt: new Date(),
    ...(fingerprint ? { fingerprint } : {}),
  } as AcceptedEvent;
}

/** A router whose paths answer `object` and `sync`, and the full passes it asked for. */
function routed(
  object: ObjectChangeResult | Error,
  sync: SyncResourceApplyOutcome | Error = new Error('unused'),
) {
  const passes: { now?: FullPassTrigger; afterMs?: number }[] = [];
  const answer = <T>(value: T | Error) =>
    value instanceof Error ? Promise.reject(value) : Promise.resolve(value);
  const router = createTargetedRouter({
    paths: { objectChanged: () => answer(object), syncResourceChanged: () => answer(sync) },
    fullPass: {
      now: (_key, trigger) => passes.push({ now: trigger }),
      after: (_key, ms) => passes.push({ afterMs: ms }),
    },
    logger: silentLogger(),
  });
  const settled = () => new Promise((resolve) => setImmediate(resolve));
  return { router, passes, settled };
}

describe('the targeted router', () => {
  it('runs the full pass now and again after the recheck for a callback without a fingerprint', () => {
    const { router, passes } = routed(new Error('no path runs'));
    router.callback(KEY, callback());
    expect(passes).to.deep.equal([{ now: 'callback' }, { afterMs: MODULE_MIRROR.unfingerprintedRecheckMs }]);
  });

  it('runs the full pass after the window for a mirror the Kyma status does not show yet, and none when it does', async () => {
    const shown = routed({ path: 'mirror', outcome: 'mirrored', reads: 1, kymaStatusChanged: false });
    shown.router.callback(KEY, callback(FINGERPRINT));
    await shown.settled();
    expect(shown.passes).to.deep.equal([]);
    const notShown = routed({ path: 'mirror', outcome: 'unchanged', reads: 1, kymaStatusChanged: true });
    notShown.router.callback(KEY, callback(FINGERPRINT));
    await notShown.settled();
    expect(notShown.passes).to.deep.equal([{ afterMs: MODULE_MIRROR.fullReconcileAfterMirrorMs }]);
  });

  it('runs the full pass now after a drift revert, a mirror that found no module, or a failure', async () => {
    for (const result of [
      { path: 'drift', outcome: 'reverted', reads: 1 } as const,
      { path: 'mirror', outcome: 'not-a-module', reads: 0 } as const,
      new Error('SKR unreachable'),
    ]) {
      const { router, passes, settled } = routed(result);
      router.callback(KEY, callback(FINGERPRINT));
      await settled();
      expect(passes, JSON.stringify(result)).to.deep.equal([{ now: 'callback' }]);
    }
  });

  it('runs no full pass for a deferred drift revert: the revert window bounds a fight', async () => {
    const { router, passes, settled } = routed({ path: 'drift', outcome: 'deferred', reads: 0 });
    router.callback(KEY, callback(FINGERPRINT));
    await settled();
    expect(passes).to.deep.equal([]);
  });

  it('follows a SyncResource apply after the window when the Kyma status changes, now when it did not apply', async () => {
    const cases: [SyncResourceApplyOutcome | Error, { now?: FullPassTrigger; afterMs?: number }[]][] = [
      [{ outcome: 'applied', state: 'Ready', kymaStatusChanged: false }, []],
      [
        { outcome: 'applied', state: 'Ready', kymaStatusChanged: true },
        [{ afterMs: MODULE_MIRROR.fullReconcileAfterMirrorMs }],
      ],
      [{ outcome: 'skipped', reason: 'Kyma paused' }, [{ now: 'syncresource' }]],
      [new Error('KCP unreachable'), [{ now: 'syncresource' }]],
    ];
    for (const [sync, expected] of cases) {
      const { router, passes, settled } = routed(new Error('unused'), sync);
      router.syncResourceChanged(KEY, 'sync-1');
      await settled();
      expect(passes, JSON.stringify(sync)).to.deep.equal(expected);
    }
  });
});
