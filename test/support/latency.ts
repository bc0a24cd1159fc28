// Latency figures as benches print them: nearest-rank percentiles of milliseconds.

/** The nearest-rank percentile `p` (0–100) of ascending `sorted`; NaN when empty. */
export function nearestRank(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] as number;
}

/** `label n=… p50 … p99 … max …` in milliseconds. */
export function latencySummary(label: string, latencies: readonly number[]): string {
  const sorted = [...latencies].sort((a, b) => a - b);
  const fmt = (ms: number) => `${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms`.padStart(8);
  return `${label.padEnd(22)} n=${String(sorted.length).padStart(4)}  p50 ${fmt(nearestRank(sorted, 50))}  p99 ${fmt(nearestRank(sorted, 99))}  max ${fmt(sorted.at(-1) ?? Number.NaN)}`;
}
