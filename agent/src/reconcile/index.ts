/**
 * Lifecycle reconciliation of KCP Kymas (docs/architecture.md): what the rest of the agent takes from the reconcile
 * layer. The Kyma reconciler is reconciler.ts; its pass, in named steps, is kyma/pass.ts; the folders kyma/,
 * modules/, manifests/ and sync-resources/ converge what their names say. The wiring that builds it is
 * agent/src/manager; the targeted "do it now" paths are agent/src/targeted.
 *
 * Decisions a caller may rely on:
 * - The SKR Kyma (`kyma-system/default`, or `spec.sync.namespace`) is created from the KCP Kyma's spec once;
 *   after that its `spec.modules` (and `spec.channel`) are the user's source of truth and are used directly for
 *   module resolution. The KCP Kyma's spec is never rewritten (its owner, e.g. provisioning, may re-apply it);
 *   what is in effect is reported in the KCP Kyma's `status.modules` (resolved version, template, state).
 * - Module CRs: created from the template's `spec.data` when absent (customResourcePolicy CreateAndDelete, the
 *   default) and then left to the user; removed when the module is disabled, but only when the agent created
 *   them (label `operator.kyma-project.io/managed-by=skr-watcher`). With policy Ignore nothing is created; with
 *   `managed: false` (state Unmanaged) the Module CR is left to the user and its ModuleConfig removed. Resolution
 *   follows upstream's rules (mandatory, beta/internal, kymaSelector, no downgrade; docs/decisions/009).
 * - ModuleConfig name: `<kyma>-<module>-<8 hex of sha256(kyma, module)>` (see `moduleConfigName`), labelled
 *   with kyma-name and module-name.
 * - SyncResources get our finalizer, so deleting one removes what it applied from the SKR first.
 * - `skip-reconciliation=true` pauses everything, deletion included, and returns no requeue.
 * - Deletion: ModuleConfigs, objects applied from SyncResources, Module CRs, the SKR Kyma and the module catalog
 *   copied into the SKR, then the finalizer.
 *   An unreachable SKR is retried (the call throws) until `deletionTimeoutMs` after the deletionTimestamp, then
 *   given up on with a `SKRCleanupAbandoned` Event; without a kubeconfig Secret the SKR side is skipped at once
 *   (`SKRCleanupSkipped` Event). The SKR's namespace (kyma-system) stays.
 * - Lists (Secrets, ModuleConfigs, SyncResources) are read from the API server's watch cache, like an informer;
 *   an object created a moment before a reconcile may be missed by that pass, and its watch event triggers the
 *   next one. Whatever decides a write is read fresh (docs/decisions/006-server-side-apply.md); the KCP Kyma comes
 *   from the caller's watch cache only at the version this reconciler last read fresh or wrote (decision 016).
 * - The reconciler keeps no state between calls. What the wiring keeps for it decides no write: the SKR client cache
 *   (keyed by the kubeconfig Secret's uid and resourceVersion, each client with its circuit breaker), the Kyma
 *   versions known (kyma-reads.ts: they only choose between the watch cache and a GET), and the lanes that run one
 *   Kyma's reconciles one at a time, and the writes of one ModuleConfig (targeted mirror or full reconcile) one at
 *   a time (modules/mirror-lanes.ts).
 */
export type { ModuleDescription, ModuleInstallation, RegistrationSettings, WatchCaches } from './context.js';
export { createKymaReconciler, type Reconciler, type ReconcileResult } from './reconciler.js';
export { MirrorLanes, mirrorLaneKey } from './modules/mirror-lanes.js';
export { cachedModuleConfig, isOwnMirror, moduleConfigName } from './modules/module-config.js';
export { cachedManifest } from './manifests/manifests-of-kyma.js';
export type { ModuleCrChange, ModuleMirrorOutcome, ModuleMirrorResult } from './modules/mirror-lanes.js';
export type { SyncResourceApplyOutcome } from './sync-resources/sync-resource.js';
export { CONDITIONS } from './status.js';
export { SKR_WEBHOOK_CONDITION } from './kyma/skr-webhook.js';
