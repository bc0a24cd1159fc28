// `kubectl skr status`: the fleet at a glance. Kymas by state, modules by state and version, then one row per
// Kyma, the unhealthy first with their reason. Two lists (Kymas, Manifests) per report, whatever the fleet's size.
import { age, columns, counts, cut, renderData, type OutputFormat } from './output.js';
import type { Kcp } from './kcp.js';
import {
  isHealthy,
  kymaView,
  readKyma,
  readManifests,
  severityOf,
  viewData,
  type KymaView,
} from './kyma-view.js';

const STATE_ORDER = ['Error', 'Warning', 'Deleting', 'Processing', 'Unknown', 'Unmanaged', 'Ready'];

export interface ModuleSummary {
  name: string;
  kymas: number;
  states: Record<string, number>;
  versions: Record<string, number>;
}

export interface FleetReport {
  namespace: string;
  kymas: { total: number; states: Record<string, number>; paused: number };
  modules: ModuleSummary[];
  /** Every Kyma, the unhealthy first (by severity, then name). */
  rows: KymaView[];
}

export async function readFleet(kcp: Kcp): Promise<FleetReport> {
  const [kymaObjects, manifestObjects] = await Promise.all([kcp.list('kyma'), kcp.list('manifest')]);
  const manifests = readManifests(manifestObjects);
  const rows = kymaObjects
    .map((object) => kymaView(readKyma(object), manifests))
    .sort((a, b) => severityOf(a) - severityOf(b) || a.name.localeCompare(b.name));
  const states: Record<string, number> = {};
  const modules = new Map<string, ModuleSummary>();
  for (const row of rows) {
    states[row.state] = (states[row.state] ?? 0) + 1;
    for (const module of row.modules) {
      const summary = modules.get(module.name) ?? { name: module.name, kymas: 0, states: {}, versions: {} };
      summary.kymas++;
      summary.states[module.state] = (summary.states[module.state] ?? 0) + 1;
      const version = module.version ?? '(none)';
      summary.versions[version] = (summary.versions[version] ?? 0) + 1;
      modules.set(module.name, summary);
    }
  }
  return {
    namespace: kcp.namespace,
    kymas: { total: rows.length, states, paused: rows.filter((row) => row.paused).length },
    modules: [...modules.values()].sort((a, b) => a.name.localeCompare(b.name)),
    rows,
  };
}

export function renderFleet(report: FleetReport, format: OutputFormat, now: Date): string {
  if (format === 'json' || format === 'yaml') {
    return renderData({ ...report, rows: report.rows.map(viewData) }, format);
  }
  const wide = format === 'wide';
  const lines: string[] = [];
  const paused = report.kymas.paused > 0 ? ` (${report.kymas.paused} paused)` : '';
  const byState = report.kymas.total > 0 ? `: ${counts(report.kymas.states, STATE_ORDER)}` : '';
  lines.push(`${report.kymas.total} Kymas in ${report.namespace}${byState}${paused}`);
  if (report.modules.length > 0) {
    lines.push('');
    lines.push(
      ...columns(
        ['MODULE', 'KYMAS', 'STATES', 'VERSIONS'],
        report.modules.map((module) => [
          module.name,
          String(module.kymas),
          counts(module.states, STATE_ORDER),
          Object.entries(module.versions)
            .sort(([a], [b]) => a.localeCompare(b, undefined, { numeric: true }))
            .map(([version, count]) => `${version} ×${count}`)
            .join(', '),
        ]),
      ),
    );
  }
  const listed = wide ? report.rows : report.rows.filter((row) => !isHealthy(row));
  if (listed.length > 0) {
    lines.push('');
    const header = wide
      ? ['KYMA', 'STATE', 'RUNTIME-ID', 'MODULES', 'PAUSED', 'CHANNEL', 'OWNER', 'LAST PASS', 'REASON']
      : ['KYMA', 'STATE', 'RUNTIME-ID', 'MODULES', 'PAUSED', 'REASON'];
    lines.push(
      ...columns(
        header,
        listed.map((row) => {
          const ready = row.modules.filter((m) => m.state === 'Ready' || m.state === 'Unmanaged').length;
          const base = [
            row.name,
            row.state,
            row.runtimeId ?? '-',
            `${ready}/${row.modules.length}`,
            row.paused ? `by ${row.paused.by ?? '?'}` : '-',
          ];
          return wide
            ? [
                ...base,
                row.channel ?? '-',
                row.owner ?? '-',
                age(row.lastOperation?.lastUpdateTime, now),
                row.reason?.replace(/\s+/g, ' ') ?? '-',
              ]
            : [...base, cut(row.reason, 100)];
        }),
      ),
    );
  }
  const hidden = report.rows.length - listed.length;
  if (hidden > 0) {
    lines.push('');
    lines.push(`${hidden} Ready Kyma(s) not listed (-o wide lists every Kyma)`);
  }
  if (!wide && listed.some((row) => row.reason)) {
    lines.push(`explain one: kubectl skr explain <kyma> -n ${report.namespace}`);
  }
  return lines.map((line) => `${line}\n`).join('');
}
