// One engine for "a set of objects the agent keeps in an SKR" (decision 020): Manifests and SyncResources are two
// producers of such sets. Apply with ordering and prune-after-apply, two-phase removal, readiness, transforms.
export * from './inventory.js';
export * from './order.js';
export * from './transforms.js';
export * from './readiness.js';
export * from './delete-set.js';
export * from './apply-set.js';
export * from './release-set.js';
export * from './holders.js';
