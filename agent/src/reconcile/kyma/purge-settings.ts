// The purge's settings and what it reports (purge.ts), apart from the purge itself so that the reconcile context can
// carry them without importing the purge.
import type { Kyma } from '@skr-watcher/api';

/** Upstream's purge error reasons (the `err_reason` of lifecycle_mgr_purgectrl_error). */
export const PURGE_ERRORS = {
  /** Listing the SKR's CRDs or objects, or stripping a finalizer, failed. */
  cleanup: 'CleanupError',
  /** The purge could not be recorded on the KCP Kyma (upstream: its purge finalizer could not be dropped). */
  record: 'PurgeFinalizerRemovalError',
} as const;
export type PurgeError = (typeof PURGE_ERRORS)[keyof typeof PURGE_ERRORS];

/** What a purge reports; the lifecycle-manager metrics implement it (lifecycle-manager-metrics.ts). */
export interface PurgeObserver {
  /** A purge began (upstream counts it before it knows the outcome). */
  started(): void;
  /** It finished and was recorded: its duration, and the Kyma's error series cleared. */
  finished(kyma: Kyma, durationMs: number): void;
  failed(kyma: Kyma, reason: PurgeError): void;
}

/** Upstream's --enable-purge-finalizer, --purge-finalizer-timeout and --skip-finalizer-purging-for. */
export interface PurgeSettings {
  timeoutMs: number;
  /** CRDs never purged: `<plural>.<group>`, `<singular>.<group>` or `*.<group>`. */
  skipFor: readonly string[];
  observer?: PurgeObserver;
}
