// Command results: a human table by default, `-o json` or `-o yaml` for scripts.
import { stringify as toYaml } from 'yaml';
import type { CertificateInfo } from '@skr-watcher/pki';

export const OUTPUT_FORMATS = ['table', 'json', 'yaml'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** A result: `data` for json/yaml (dates as RFC 3339), `rows` for the table. */
export interface CommandResult {
  data: unknown;
  table: { columns: string[]; rows: string[][] } | { lines: string[] };
}

export function render(result: CommandResult, format: OutputFormat): string {
  if (format === 'json') return `${JSON.stringify(result.data, replacer, 2)}\n`;
  if (format === 'yaml') return toYaml(JSON.parse(JSON.stringify(result.data, replacer)) as unknown);
  if ('lines' in result.table) return result.table.lines.map((line) => `${line}\n`).join('');
  return formatTable(result.table.columns, result.table.rows);
}

function replacer(_key: string, value: unknown): unknown {
  return value instanceof Date ? value.toISOString() : value;
}

export function formatTable(columns: string[], rows: string[][]): string {
  const widths = columns.map((column, i) =>
    Math.max(column.length, ...rows.map((row) => (row[i] ?? '').length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join('   ')
      .trimEnd();
  return [line(columns), ...rows.map(line)].map((l) => `${l}\n`).join('');
}

export function certificateRow(info: CertificateInfo): string[] {
  return [
    info.commonName,
    info.issuerCommonName,
    info.isCa ? 'CA' : 'leaf',
    info.notAfter.toISOString(),
    [...info.dnsNames, ...info.ipAddresses].join(',') || '-',
    info.serialNumber,
  ];
}

export const CERTIFICATE_COLUMNS = ['SUBJECT CN', 'ISSUER CN', 'TYPE', 'NOT AFTER', 'SANS', 'SERIAL'];
