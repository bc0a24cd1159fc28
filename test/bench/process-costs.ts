// What one phase of bench:e2e costs the processes of the local system: CPU milliseconds of each process (from
// /proc/<pid>/stat) and the requests each API server served (its own apiserver_request_total), both per edit. On a
// shared machine the latencies move with the load; these counts do not, so a before/after pair compares them.
import { readFile } from 'node:fs/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import { apiserverMetrics, labelOf as label } from '../support/apiserver-metrics.js';
import type { Samples } from '../support/prometheus-text.js';

/** A process whose CPU time is counted, or an API server whose requests are. */
export interface Costed {
  name: string;
  pid: () => number;
  /** An API server: its /metrics is read with these credentials. */
  kubeConfig?: KubeConfig;
}

export interface CostSnapshot {
  cpuMs: Map<string, number>;
  requests: Map<string, Samples>;
}

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ; 100 on Linux). */
const TICKS_PER_SECOND = 100;

/** CPU milliseconds (user and system) a process has used so far; undefined when it is gone. */
export async function cpuMsOf(pid: number): Promise<number | undefined> {
  if (pid <= 0) return undefined;
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (!stat) return undefined;
  // The command may hold spaces and parentheses: the fields after it start past the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the command.
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
}

export async function snapshot(parts: Costed[]): Promise<CostSnapshot> {
  const cpuMs = new Map<string, number>();
  const requests = new Map<string, Samples>();
  await Promise.all(
    parts.map(async (part) => {
      const ms = await cpuMsOf(part.pid());
      if (ms !== undefined) cpuMs.set(part.name, ms);
      if (part.kubeConfig)
        requests.set(part.name, await apiserverMetrics(part.kubeConfig).catch(() => new Map()));
    }),
  );
  cpuMs.set('bench (this process)', (process.cpuUsage().user + process.cpuUsage().system) / 1000);
  return { cpuMs, requests };
}

/**
 * Lines saying what `edits` edits cost between the two snapshots: CPU ms per edit of each process, and per API
 * server the requests per edit by verb and resource (watches count when they start; the top `rows` per server).
 */
export function costLines(
  before: CostSnapshot,
  after: CostSnapshot,
  edits: number,
  rows = 12,
  unit = 'edit',
): string[] {
  const per = (n: number) => (n / edits).toFixed(2);
  const lines: string[] = [];
  const cpu = [...after.cpuMs]
    .map(([name, ms]) => [name, ms - (before.cpuMs.get(name) ?? ms)] as const)
    .sort((a, b) => b[1] - a[1]);
  const total = cpu.reduce((sum, [, ms]) => sum + ms, 0);
  lines.push(
    `CPU ms per ${unit} (total ${per(total)}): ${cpu.map(([name, ms]) => `${name} ${per(ms)}`).join(', ')}`,
  );
  for (const [server, samples] of after.requests) {
    const earlier = before.requests.get(server) ?? new Map<string, number>();
    const byRequest = new Map<string, number>();
    for (const [key, value] of samples) {
      const delta = value - (earlier.get(key) ?? 0);
      if (delta <= 0) continue;
      const subresource = label(key, 'subresource');
      const what = `${label(key, 'verb')} ${label(key, 'resource')}${subresource ? `/${subresource}` : ''}`;
      byRequest.set(what, (byRequest.get(what) ?? 0) + delta);
    }
    const sorted = [...byRequest].sort((a, b) => b[1] - a[1]);
    const sum = sorted.reduce((s, [, n]) => s + n, 0);
    lines.push(
      `${server} API server requests per ${unit} (total ${per(sum)}): ${sorted
        .slice(0, rows)
        .map(([what, n]) => `${what} ${per(n)}`)
        .join(', ')}`,
    );
  }
  return lines;
}
