// The Manifest controller (decision 021), as lifecycle-manager's reads: one Manifest's module pulled from the
// registry and kept in the SKR by named steps, each answering go on or the status to end with. The files:
//   pass.ts           one pass: skip, leave (unmanaged), remove (deleting) or install; the operations counter
//   install-steps.ts  finalizers → source → apply (rendered, holders checked, pruned) → verdict → default CR →
//                     readiness → status → digest installed
//   removal-steps.ts  users' CRs → default CR → the set in two phases → finalizers
//   leave.ts          a module left in the SKR, its Manifest gone, an Event on the Kyma
//   kyma-teardown.ts  all of a Kyma's Manifests: removed, left, or marked orphaned
//   render.ts         the raw manifest's objects checked, upstream's transforms
//   default-cr.ts     the default CR: body, address, users' CRs, customStateCheck
//   manifest-status.ts, finalizers.ts, manifest.ts, step-result.ts  what the steps stand on
// This module is what the rest of the agent imports.
export { ensureFinalizers, handBackFinalizers, takeOverFinalizers } from './finalizers.js';
export { leaveModule } from './leave.js';
export { leaveDeletedModules, markOrphanedManifests, removeModulesOfKyma } from './kyma-teardown.js';
export { reconcileManifest } from './pass.js';
export { manifestTransforms, setMembers } from './render.js';
export type { ManifestOutcome } from './step-result.js';
