// One environment (kcp, skr1, skr2) per test process, started on first use and stopped by the root hook.
import { startEnvironment, type Environment } from './environment.js';

export const SHARED_PLANES = ['kcp', 'skr1', 'skr2'] as const;
let shared: Promise<Environment> | undefined;

/** The shared planes. Tests isolate themselves by namespace or name, never by restarting planes. */
export function sharedEnvironment(): Promise<Environment> {
  shared ??= startEnvironment({
    planes: [...SHARED_PLANES],
    log: process.env['TESTENV_VERBOSE'] ? (line) => process.stderr.write(line + '\n') : undefined,
  });
  return shared;
}

export async function stopSharedEnvironment(): Promise<void> {
  if (!shared) return;
  const env = await shared.catch(() => undefined);
  shared = undefined;
  await env?.stop();
}
