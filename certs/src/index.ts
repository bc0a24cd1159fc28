export { runCli, EXIT, type CliIo } from './program.js';
export { rotateCa, type RotateCaOptions, type RotationReport } from './rotation.js';
export { KcpPkiSecrets, type CaSecret, type LeafSecret } from '@skr-watcher/kube';
