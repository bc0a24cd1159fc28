export { runCli, EXIT } from './program.js';
export { UsageError } from './cli-io.js';
export type { CliIo } from './cli-io.js';
