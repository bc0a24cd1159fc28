// The one router of the "do it now" paths (decision 010), and the one place that says when the Kyma's full pass
// follows each. Validating admission runs before the API server stores a write, so a read right after a callback
// may not show it yet: a callback with a fingerprint waits (milliseconds) until the SKR shows the write. The paths
// themselves are paths.ts; a Module CR's callback becomes its ModuleConfig write in module-mirror.ts.
//
//   what came in                               path                  full pass
//   callback without fingerprint (upstream's)  none                  now, and again after unfingerprintedRecheckMs
//                                                                    (the write may not show yet at the first)
//   callback, object a module installed        drift revert          now; none when the revert is deferred (the
//                                                                    object's revert window is not over: the
//                                                                    Kyma's scheduled passes put it back)
//   callback, Module CR, mirrored/unchanged    mirror                after fullReconcileAfterMirrorMs, or none when
//                                                                    the Kyma's status already shows its state
//   callback, anything else or a failure       mirror (found none)   now
//   SyncResource spec change, applied          SyncResource apply    after fullReconcileAfterMirrorMs, or none when
//                                                                    the Kyma's status would not change
//   SyncResource change not applied or failed  SyncResource apply    now
//
// A pass "now" goes through `fullPass.now` (the agent paces callbacks': one per Kyma per interval, so a flood of
// callbacks costs one); a later one through `fullPass.after` (the queue keeps the earliest schedule). The window lets a burst
// of edits cost one pass, and a spec edit the status already covers none: on a busy agent those passes competed
// with the targeted work of the next edits. A pass whose inputs did not change leaves the SKR alone (decision 029): a
// callback about anything but the SKR Kyma or a mirrored Module CR makes the Kyma's next pass a full one (`distrust`).
import { GROUP, KINDS, MODULE_MIRROR, hasFingerprint } from '@skr-watcher/api';
import type { Logger } from '@skr-watcher/telemetry';
import type { AcceptedEvent } from '../listener/index.js';
import type { ObjectChangeResult, TargetedPaths } from './paths.js';
import type { SyncResourceApplyOutcome } from '../reconcile/sync-resources/sync-resource.js';

/** What asked for a full pass: the agent paces callbacks' (a flooding SKR costs one per interval), not watches'. */
export type FullPassTrigger = 'callback' | 'syncresource';

export interface FullPass {
  /** Starts the Kyma's full pass now (maybe paced). */
  now(kymaKey: string, trigger: FullPassTrigger): void;
  /** Runs it after `ms`, unless one is due sooner. */
  after(kymaKey: string, ms: number): void;
  /**
   * The Kyma's next pass re-applies everything even if its inputs did not change (the no-op rule, decision 029):
   * the callback was about something those inputs do not show.
   */
  distrust?(kymaKey: string): void;
}

export interface TargetedRouter {
  /** A callback (or an internal wake-up without an event) for the Kyma `namespace/name`. */
  callback(kymaKey: string, event?: AcceptedEvent): void;
  /** A SyncResource's spec changed. */
  syncResourceChanged(kymaKey: string, name: string): void;
}

export interface RouterDeps {
  paths: Pick<TargetedPaths, 'objectChanged' | 'syncResourceChanged'>;
  fullPass: FullPass;
  logger: Logger;
}

export function createTargetedRouter({ paths, fullPass, logger }: RouterDeps): TargetedRouter {
  return {
    callback(kymaKey, event) {
      if (!event?.fingerprint || !hasFingerprint(event.fingerprint)) {
        // Which write it announces is not known: the SKR Kyma's is among a pass's inputs, any other object's is not.
        if (!event || !isKyma(event.gvk)) fullPass.distrust?.(kymaKey);
        fullPass.now(kymaKey, 'callback');
        if (event) fullPass.after(kymaKey, MODULE_MIRROR.unfingerprintedRecheckMs);
        return;
      }
      const change = {
        gvk: event.gvk,
        namespace: event.watched.namespace,
        name: event.watched.name,
        fingerprint: event.fingerprint,
        receivedAtMs: event.receivedAt.getTime(),
      };
      void paths.objectChanged(kymaKey, change).then(
        (result) => followObjectChange(fullPass, kymaKey, result, isKyma(event.gvk)),
        (error: unknown) => {
          // The full pass retries whatever failed here, with backoff and status.
          logger.debug(
            { err: error, kyma: kymaKey, gvk: event.gvk, name: event.watched.name },
            'targeted path failed',
          );
          fullPass.distrust?.(kymaKey);
          fullPass.now(kymaKey, 'callback');
        },
      );
    },
    syncResourceChanged(kymaKey, name) {
      void paths.syncResourceChanged(kymaKey, name).then(
        (result) => followSyncResourceApply(fullPass, kymaKey, result),
        (error: unknown) => {
          logger.debug(
            { err: error, kyma: kymaKey, syncResource: name },
            'targeted SyncResource apply failed',
          );
          fullPass.now(kymaKey, 'syncresource');
        },
      );
    },
  };
}

function followObjectChange(
  fullPass: FullPass,
  kymaKey: string,
  result: ObjectChangeResult,
  aboutKyma: boolean,
): void {
  if (result.path === 'drift') {
    // The next pass re-applies the whole set, whenever it runs.
    fullPass.distrust?.(kymaKey);
    // Something in the SKR keeps changing an installed object: a pass per write would revert it at the pace of the
    // fight, which the drift revert's windows exist to bound.
    if (result.outcome !== 'deferred') fullPass.now(kymaKey, 'callback');
    return;
  }
  // The ModuleConfig holds the Module CR's spec: a change of it is a change of the pass's inputs.
  if (result.path === 'mirror' && (result.outcome === 'mirrored' || result.outcome === 'unchanged')) {
    if (result.kymaStatusChanged !== false) fullPass.after(kymaKey, MODULE_MIRROR.fullReconcileAfterMirrorMs);
    return;
  }
  // A Kyma edit, a module without ModuleConfig yet, a Module CR gone or never shown: the full pass's job, at once.
  // Of those, only the Kyma's spec is among its inputs.
  if (!aboutKyma) fullPass.distrust?.(kymaKey);
  fullPass.now(kymaKey, 'callback');
}

function isKyma(gvk: { group: string; kind: string }): boolean {
  return gvk.group === GROUP && gvk.kind === KINDS.kyma.kind;
}

function followSyncResourceApply(
  fullPass: FullPass,
  kymaKey: string,
  result: SyncResourceApplyOutcome,
): void {
  if (result.outcome !== 'applied') fullPass.now(kymaKey, 'syncresource');
  else if (result.kymaStatusChanged) fullPass.after(kymaKey, MODULE_MIRROR.fullReconcileAfterMirrorMs);
}
