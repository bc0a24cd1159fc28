// Summarises a V8 .heapsnapshot by constructor (the "Summary" view of DevTools, self sizes only), without
// JSON.parse of the whole file: a snapshot of a few hundred MB of heap is larger than V8's longest string.
//
//   node --import tsx test/support/heap-summary.ts FILE.heapsnapshot [--top 25]
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface HeapGroup {
  /** `(type) name`, e.g. `object Kyma`, `string`, `closure pooledKubeConfig`. */
  group: string;
  count: number;
  selfBytes: number;
}

export interface HeapSummary {
  totalBytes: number;
  nodes: number;
  groups: HeapGroup[];
}

/** Position right after `"key":` (then skips whitespace), or -1. */
function after(buffer: Buffer, key: string, from = 0): number {
  const at = buffer.indexOf(`"${key}":`, from, 'utf8');
  if (at < 0) return -1;
  let i = at + key.length + 3;
  while (buffer[i] === 0x20 || buffer[i] === 0x0a || buffer[i] === 0x0d) i++;
  return i;
}

/** Non-negative integers of a JSON number array starting at `start` (its `[`), up to its `]`. */
function integers(buffer: Buffer, start: number): { values: Float64Array; end: number } {
  let end = buffer.indexOf(0x5d, start); // ']': the array holds numbers only
  const values = new Float64Array(end - start); // upper bound; trimmed below
  let count = 0;
  let value = -1;
  for (let i = start + 1; i < end; i++) {
    const c = buffer[i] as number;
    if (c >= 0x30 && c <= 0x39) value = (value < 0 ? 0 : value * 10) + (c - 0x30);
    else if (value >= 0) {
      values[count++] = value;
      value = -1;
    }
  }
  if (value >= 0) values[count++] = value;
  end += 1;
  return { values: values.subarray(0, count), end };
}

export async function summariseHeapSnapshot(path: string): Promise<HeapSummary> {
  const buffer = await readFile(path);
  const metaStart = after(buffer, 'meta');
  const nodesAt = after(buffer, 'nodes', metaStart);
  // The meta object sits before "nodes" and is small: parse it for the field layout.
  const snapshotStart = buffer.indexOf('{', after(buffer, 'snapshot'));
  const metaText = buffer.subarray(snapshotStart, buffer.lastIndexOf('}', nodesAt) + 1).toString('utf8');
  const meta = (
    JSON.parse(metaText) as {
      meta: { node_fields: string[]; node_types: [string[], ...unknown[]] };
    }
  ).meta;
  const { values: nodes } = integers(buffer, nodesAt);
  const stringsAt = after(buffer, 'strings', nodesAt);
  const stringsEnd = buffer.lastIndexOf(']');
  const strings = JSON.parse(buffer.subarray(stringsAt, stringsEnd + 1).toString('utf8')) as string[];

  const width = meta.node_fields.length;
  const typeAt = meta.node_fields.indexOf('type');
  const nameAt = meta.node_fields.indexOf('name');
  const sizeAt = meta.node_fields.indexOf('self_size');
  const types = meta.node_types[0];
  const groups = new Map<string, HeapGroup>();
  let totalBytes = 0;
  for (let n = 0; n < nodes.length; n += width) {
    const type = types[nodes[n + typeAt] as number] ?? '?';
    const name = strings[nodes[n + nameAt] as number] ?? '?';
    const size = nodes[n + sizeAt] as number;
    totalBytes += size;
    // Strings and code are many distinct names: group them by type alone.
    const key =
      type === 'object' || type === 'closure' || type === 'native' || type === 'hidden'
        ? `${type} ${name.slice(0, 60)}`
        : type;
    const group = groups.get(key) ?? { group: key, count: 0, selfBytes: 0 };
    group.count += 1;
    group.selfBytes += size;
    groups.set(key, group);
  }
  return {
    totalBytes,
    nodes: nodes.length / width,
    groups: [...groups.values()].sort((a, b) => b.selfBytes - a.selfBytes),
  };
}

export function formatHeapSummary(summary: HeapSummary, top = 25): string {
  const mb = (bytes: number) => (bytes / 1048576).toFixed(1);
  return [
    `heap snapshot: ${mb(summary.totalBytes)} MB in ${summary.nodes} objects; by constructor (self size):`,
    ...summary.groups
      .slice(0, top)
      .map((g) => `  ${mb(g.selfBytes).padStart(7)} MB ${String(g.count).padStart(9)}  ${g.group}`),
  ].join('\n');
}

/** The .heapsnapshot file in `dir` once its size has stopped growing (the agent writes it on its main thread). */
export async function snapshotWritten(dir: string): Promise<string> {
  const deadline = Date.now() + 5 * 60_000;
  let lastSize = -1;
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const name = (await readdir(dir)).find((file) => file.endsWith('.heapsnapshot'));
    if (!name) continue;
    const size = (await stat(join(dir, name))).size;
    if (size > 0 && size === lastSize) return join(dir, name);
    lastSize = size;
  }
  throw new Error(`no heap snapshot in ${dir} after 5 min`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const file = process.argv[2];
  const at = process.argv.indexOf('--top');
  if (!file) {
    console.error('usage: heap-summary.ts FILE.heapsnapshot [--top N]');
    process.exit(2);
  }
  summariseHeapSnapshot(file).then(
    (summary) => console.log(formatHeapSummary(summary, at > 0 ? Number(process.argv[at + 1]) : undefined)),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
