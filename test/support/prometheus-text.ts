// The agent's /metrics as the benches read it: Prometheus text into `name{labels}` → value, and sums over series.

export type Samples = Map<string, number>;

/** Parses Prometheus text into `name{labels}` → value. */
export function parseMetrics(text: string): Samples {
  const samples: Samples = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    samples.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return samples;
}

/** Sum of the series whose `name{labels}` starts with `prefix` and contains every one of `labels`. */
export function sumOf(samples: Samples, prefix: string, ...labels: string[]): number {
  let sum = 0;
  for (const [key, value] of samples)
    if (key.startsWith(prefix) && labels.every((label) => key.includes(label))) sum += value;
  return sum;
}
