// Durations as flags spell them: Go's time.ParseDuration grammar (kubectl, controller-runtime), plus `d`.

/** Milliseconds per unit. `d` (24 h) is ours: certificate periods are said in days; Go stops at `h`. */
const UNIT_MS: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

/** Node's timers fire at once (with a warning) beyond 2^31-1 ms, about 24.8 days. */
export const TIMER_MAX_MS = 2 ** 31 - 1;

/** A duration that does not parse or is out of range; the message says what was expected. */
export class DurationError extends Error {}

const TERM = /(\d+\.?\d*|\.\d+)(ns|us|µs|ms|s|m|h|d)/y;

/**
 * `500ms`, `30s`, `10m`, `1h30m`, `1.5h`, `7d`, or `0`: one or more number+unit terms, no spaces, no sign (a
 * negative duration means nothing for our flags). Returns whole milliseconds (rounded); above `max` is refused.
 */
export function parseDuration(text: string, max = Number.MAX_SAFE_INTEGER): number {
  const expected = 'a duration such as 500ms, 30s, 10m, 1h30m or 7d (units ns, us, ms, s, m, h, d)';
  if (text === '0') return 0;
  if (text.length === 0) throw new DurationError(`an empty value is not ${expected}`);
  if (/^\d+(\.\d*)?$/.test(text))
    throw new DurationError(`"${text}" has no unit: write ${text}s, ${text}ms or another unit`);
  if (text.startsWith('-')) throw new DurationError(`"${text}" is negative; expected ${expected}`);
  let ms = 0;
  TERM.lastIndex = 0;
  while (TERM.lastIndex < text.length) {
    const at = TERM.lastIndex;
    const term = TERM.exec(text);
    if (!term) {
      throw new DurationError(
        `${JSON.stringify(text)} is not ${expected}` +
          (at > 0 ? ` (cannot read ${JSON.stringify(text.slice(at))})` : ''),
      );
    }
    ms += Number(term[1]) * (UNIT_MS[term[2] as string] as number);
  }
  const rounded = Math.round(ms);
  if (!(rounded <= max))
    throw new DurationError(`"${text}" is longer than the maximum, ${formatDuration(max)}`);
  return rounded;
}

/** The shortest spelling parseDuration reads back, as Go prints it: 300000 → `5m`, 5400000 → `1h30m`, 1500 → `1.5s`. */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0';
  if (ms < 1_000) return `${ms}ms`;
  const hours = Math.floor(ms / 3_600_000);
  const minutes = Math.floor((ms % 3_600_000) / 60_000);
  const seconds = (ms % 60_000) / 1_000;
  return `${hours ? `${hours}h` : ''}${minutes ? `${minutes}m` : ''}${seconds ? `${seconds}s` : ''}`;
}
