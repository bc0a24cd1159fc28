export { startEnvironment, installCrds, DEFAULT_CRD_DIR } from './environment.js';
export type { ControlPlane, Environment, EnvironmentOptions } from './environment.js';
export { ensureBinaries, cacheDir } from './binaries.js';
export type { Binaries } from './binaries.js';
export { liveChildPids } from './processes.js';
export { freePort } from './ports.js';
export { KUBERNETES_VERSION, ETCD_VERSION } from './versions.js';
export { sharedEnvironment, stopSharedEnvironment, SHARED_PLANES } from './shared.js';
