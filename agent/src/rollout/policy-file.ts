// The maintenance policy as upstream mounts it: `policy.json` in a directory (upstream: /etc/maintenance-policy, from
// the ConfigMap klm-maintenance-config, the directory in MAINTENANCE_POLICY_PATH). Read at start and whenever asked
// again; a policy that cannot be read is kept as its reason, so only upgrades that need downtime fail on it.
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
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
