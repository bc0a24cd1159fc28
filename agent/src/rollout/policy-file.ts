// The maintenance policy as upstream mounts it: `policy.json` in a directory (upstream: /etc/maintenance-policy, from
// the ConfigMap klm-maintenance-config, the directory in MAINTENANCE_POLICY_PATH). Read at start and whenever asked
// again; a policy that cannot be read is kept as its reason, so only upgrades that need downtime fail on it.
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { scrapeTimeGauge, type Registry } from '@skr-watcher/telemetry';
import { parsePolicy, type MaintenancePolicy } from './maintenance-window.js';

export const POLICY_FILE = 'policy.json';
export const DEFAULT_POLICY_DIR = '/etc/maintenance-policy';
const MAX_POLICY_BYTES = 1024 * 1024;

export type LoadedPolicy = MaintenancePolicy | { error: string };

export async function loadPolicy(dir: string): Promise<LoadedPolicy> {
  const file = join(dir, POLICY_FILE);
  try {
    const info = await stat(file);
    if (!info.isFile()) return { error: `${file} is not a file` };
    if (info.size > MAX_POLICY_BYTES)
      return { error: `${file} has ${info.size} bytes, more than the ${MAX_POLICY_BYTES} allowed` };
    return parsePolicy(await readFile(file, 'utf8'));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { error: `${file} does not exist` };
    return { error: `${file}: ${(error as Error).message}` };
  }
}

export interface PolicyWatch {
  /** The policy as last read, or why it could not be read. */
  current(): LoadedPolicy;
  stop(): void;
}

/**
 * Reads the policy now and again every `intervalMs` (a mounted ConfigMap changes in place), reporting each read as
 * `skr_agent_maintenance_policy_read_success` (1 read, 0 not). A failed read after a good one keeps the good one:
 * a ConfigMap update caught mid-write is no reason to hold every upgrade.
 */
export async function watchPolicy(
  dir: string,
  options: { registry?: Registry; intervalMs?: number; onError?: (error: string) => void } = {},
): Promise<PolicyWatch> {
  let current = await loadPolicy(dir);
  let lastRead = !('error' in current);
  if (!lastRead) options.onError?.((current as { error: string }).error);
  if (options.registry)
    scrapeTimeGauge(options.registry, {
      name: 'skr_agent_maintenance_policy_read_success',
      help: 'Whether the last read of the maintenance policy file succeeded (1) or not (0).',
      collect() {
        this.set(lastRead ? 1 : 0);
      },
    });
  const timer = setInterval(() => {
    void loadPolicy(dir).then((next) => {
      lastRead = !('error' in next);
      if (lastRead || 'error' in current) current = next;
      if (!lastRead) options.onError?.((next as { error: string }).error);
    });
  }, options.intervalMs ?? 30_000);
  timer.unref();
  return { current: () => current, stop: () => clearInterval(timer) };
}
