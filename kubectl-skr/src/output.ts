// Output as kubectl prints it: aligned columns for people, `-o json|yaml` for scripts, `-o wide` for more columns.
import { stringify as toYaml } from 'yaml';

export const OUTPUT_FORMATS = ['table', 'wide', 'json', 'yaml'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

export function isOutputFormat(value: string): value is OutputFormat {
  return (OUTPUT_FORMATS as readonly string[]).includes(value);
}

/** Data as a script reads it: JSON (indented) or YAML. */
export function renderData(data: unknown, format: 'json' | 'yaml'): string {
  return format === 'json' ? `${JSON.stringify(data, null, 2)}\n` : toYaml(data);
}

/** Columns padded to their widest cell, three spaces apart (kubectl's look); the last column is not padded. */
export function columns(header: string[], rows: string[][]): string[] {
  const width = header.map((title, i) => Math.max(title.length, ...rows.map((row) => (row[i] ?? '').length)));
  const render = (cells: string[]) =>
    cells
      .map((cell, i) => (i < cells.length - 1 ? cell.padEnd(width[i] ?? 0) : cell))
      .join('   ')
      .trimEnd();
  return [render(header), ...rows.map(render)];
}

/** A cell cut to `max` characters with an ellipsis, so one long message does not push a table off screen. */
export function cut(text: string | undefined, max: number): string {
  if (!text) return '-';
  const oneLine = text.replace(/\s+/g, ' ').trim();
  return oneLine.length > max ? `${oneLine.slice(0, max - 1)}…` : oneLine;
}

/** `3 Ready, 1 Error`, most severe first as given by `order`. */
export function counts(byKey: Record<string, number>, order: string[] = []): string {
  const rank = (key: string) => {
    const at = order.indexOf(key);
    return at < 0 ? order.length : at;
  };
  return Object.entries(byKey)
    .sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b))
    .map(([key, count]) => `${count} ${key}`)
    .join(', ');
}

/** How long ago `at` was, as kubectl's AGE column: 45s, 12m, 3h, 5d. */
export function age(at: string | Date | undefined, now: Date): string {
  if (!at) return '-';
  const ms = now.getTime() - new Date(at).getTime();
  if (!Number.isFinite(ms)) return '-';
  const seconds = Math.max(0, Math.round(ms / 1000));
  if (seconds < 120) return `${seconds}s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)}m`;
  if (seconds < 172_800) return `${Math.round(seconds / 3600)}h`;
  return `${Math.round(seconds / 86_400)}d`;
}
