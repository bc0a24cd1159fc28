// A process in a CPU cgroup of its own, as a Pod's container is on a node: the kernel then shares the cores between
// groups first and only inside a group by thread policy. The SKR webhook's dispatch thread runs SCHED_IDLE
// (decision 015), which in a Pod ranks it only among its own container's threads; on a bench host where every
// process shares one group it would rank below every other runnable thread of the machine (API servers, agent,
// managers), which no Pod sees. Needs root and a cgroup v1 `cpu` or a cgroup v2 hierarchy; elsewhere it says why not.
import { existsSync } from 'node:fs';
import { mkdir, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

const V1_CPU = '/sys/fs/cgroup/cpu';
const V2_ROOT = '/sys/fs/cgroup';

/** Moves `pid` (all its threads) into a new cgroup named `name`; resolves to its path, or to why it could not. */
export async function intoOwnCpuGroup(
  pid: number,
  name: string,
): Promise<{ path: string } | { reason: string }> {
  const root = existsSync(join(V1_CPU, 'tasks'))
    ? V1_CPU
    : existsSync(join(V2_ROOT, 'cgroup.controllers'))
      ? V2_ROOT
      : undefined;
  if (!root) return { reason: 'no cgroup cpu hierarchy' };
  if (process.getuid?.() !== 0) return { reason: 'not root' };
  const path = join(root, `skr-bench-${name}-${pid}`);
  try {
    await mkdir(path, { recursive: true });
    await writeFile(join(path, 'cgroup.procs'), `${pid}\n`);
    return { path };
  } catch (error) {
    return { reason: (error as Error).message };
  }
}

/** Removes cgroups made by intoOwnCpuGroup once their processes are gone; one still in use is left. */
export async function removeCpuGroups(paths: readonly string[]): Promise<void> {
  for (const path of paths) await rmdir(path).catch(() => undefined);
}
