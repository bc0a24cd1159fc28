// `kubectl skr status`: the fleet at a glance. Kymas by state, modules by state and version, then one row per
// Kyma, the unhealthy first with their reason. Two lists (Kymas, Manifests) per report, whatever the fleet's size.
import { age, columns, counts, cut, renderData, type OutputFormat } from './output.js';
import type { Kcp } from './kcp.js';
import { fleetReport, isHealthy, viewData, type FleetReport } from '@skr-watcher/api';

const STATE_ORDER = ['Error', 'Warning', 'Deleting', 'Processing', 'Unknown', 'Unmanaged', 'Ready'];

export async function readFleet(kcp: Kcp): Promise<FleetReport> {
  const [kymaObjects, manifestObjects] = await Promise.all([kcp.list('kyma'), kcp.list('manifest')]);
  return fleetReport(kcp.namespace, kymaObjects, manifestObjects);
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
