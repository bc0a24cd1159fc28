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

const SAMPLE_CR = { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Sample' };
const SKR_KYMA = { group: 'operator.kyma-project.io', version: 'v1beta2', kind: 'Kyma' };

function callback(fingerprint?: ChangeFingerprint, gvk = SAMPLE_CR): AcceptedEvent {
  return {
    runtimeId: 'r',
    gvk,
    watched: { namespace: 'kyma-system', name: gvk === SKR_KYMA ? 'default' : 'sample' },
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
  /** Kymas whose next pass the router made a full one. */
  const distrusted: string[] = [];
  const answer = <T>(value: T | Error) =>
    value instanceof Error ? Promise.reject(value) : Promise.resolve(value);
  const router = createTargetedRouter({
    paths: { objectChanged: () => answer(object), syncResourceChanged: () => answer(sync) },
    fullPass: {
      now: (_key, trigger) => passes.push({ now: trigger }),
      after: (_key, ms) => passes.push({ afterMs: ms }),
      distrust: (key) => distrusted.push(key),
    },
    logger: silentLogger(),
  });
  const settled = () => new Promise((resolve) => setImmediate(resolve));
  return { router, passes, distrusted, settled };
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

  it("makes the next pass a full one after a callback about what a pass's inputs do not show, not the SKR Kyma or a mirrored Module CR", async () => {
    const cases: [ObjectChangeResult | Error, AcceptedEvent | undefined, boolean][] = [
      // Without a fingerprint: the SKR Kyma's spec is an input; any other object, or no event, is not.
      [new Error('no path runs'), callback(undefined, SKR_KYMA), false],
      [new Error('no path runs'), callback(), true],
      [new Error('no path runs'), undefined, true],
      // With one: drift (put back or deferred) and what the mirror could not take are not inputs.
      [{ path: 'drift', outcome: 'reverted', reads: 1 }, callback(FINGERPRINT), true],
      [{ path: 'drift', outcome: 'deferred', reads: 0 }, callback(FINGERPRINT), true],
      [{ path: 'mirror', outcome: 'not-a-module', reads: 0 }, callback(FINGERPRINT), true],
      [new Error('SKR unreachable'), callback(FINGERPRINT), true],
      [{ path: 'mirror', outcome: 'not-a-module', reads: 0 }, callback(FINGERPRINT, SKR_KYMA), false],
      // A mirrored (or already mirrored) Module CR changed its ModuleConfig, which is an input.
      [
        { path: 'mirror', outcome: 'mirrored', reads: 1, kymaStatusChanged: true },
        callback(FINGERPRINT),
        false,
      ],
      [
        { path: 'mirror', outcome: 'unchanged', reads: 1, kymaStatusChanged: false },
        callback(FINGERPRINT),
        false,
      ],
    ];
    for (const [result, event, full] of cases) {
      const { router, distrusted, settled } = routed(result);
      router.callback(KEY, event);
      await settled();
      expect(distrusted, `${JSON.stringify(result)} ${event?.gvk.kind ?? 'no event'}`).to.deep.equal(
        full ? [KEY] : [],
      );
    }
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
