// Option parsing shared by the commands; a bad value is a usage error (exit 2).
import { InvalidArgumentError, Option } from 'commander';
import { DEFAULTS, parseDuration } from '@skr-watcher/api';
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

/** A duration option (grammar: `parseDuration` in packages/api, e.g. `90s`, `1h30m`, `7d`). */
export function parseDurationOption(value: string): number {
  try {
    return parseDuration(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
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
