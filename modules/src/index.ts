export { runCli, EXIT, UsageError } from './program.js';
export type { CliIo } from './program.js';
