// Option parsing shared by the commands; a bad value is a usage error (exit 2).
import { InvalidArgumentError, Option } from 'commander';
import { DEFAULTS } from '@skr-watcher/api';
import { OUTPUT_FORMATS, type OutputFormat } from './output.js';

/** A usage error found after parsing (conflicting or missing flags): exit code 2. */
export class UsageError extends Error {}

export function outputOption(): Option {
  return new Option('-o, --output <format>', 'output format').choices(OUTPUT_FORMATS).default('table');
}

export function namespaceOption(): Option {
  return new Option('-n, --namespace <namespace>', 'KCP namespace of the certificate Secrets').default(
    DEFAULTS.kcpNamespace,
  );
}

export function keyBitsOption(defaultBits: number): Option {
  return new Option('--key-bits <bits>', 'RSA key size')
    .choices(['2048', '3072', '4096'])
    .default(String(defaultBits));
}

export function parsePositiveNumber(value: string): number {
  const number = Number(value);
  if (!/^\d+(\.\d+)?$/.test(value) || !(number > 0))
    throw new InvalidArgumentError('Expected a positive number.');
  return number;
}

export function parsePositiveInteger(value: string): number {
  if (!/^[1-9]\d*$/.test(value)) throw new InvalidArgumentError('Expected a positive integer.');
  return Number(value);
}

const DURATION_UNITS_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Durations as operators write them: `90s`, `15m`, `24h`, `7d`, or combined like `1h30m`. */
export function parseDuration(value: string): number {
  const parts = [...value.matchAll(/(\d+)(ms|s|m|h|d)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== value) {
    throw new InvalidArgumentError('Expected a duration like 90s, 15m, 24h or 7d.');
  }
  return parts.reduce(
    (sum, [, amount, unit]) => sum + Number(amount) * (DURATION_UNITS_MS[unit as string] ?? 0),
    0,
  );
}

export function parseInstant(value: string): Date {
  const date = new Date(value);
  if (!/^\d{4}-\d{2}-\d{2}T/.test(value) || Number.isNaN(date.getTime())) {
    throw new InvalidArgumentError('Expected an RFC 3339 timestamp like 2026-01-31T12:00:00Z.');
  }
  return date;
}

export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

export type { OutputFormat };
