// Shard identities: the name a replica goes by on its ring, a DNS label so that it can also name its Lease.
import { hostname } from 'node:os';

/** A label value (≤ 63) that is also a DNS label, so it can name the Lease: lower-case letters, digits, '-'. */
const IDENTITY = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

export function validShardIdentity(identity: string): boolean {
  return IDENTITY.test(identity);
}

/** Throws, saying what an identity must be, unless `identity` is a valid one. */
export function checkShardIdentity(identity: string): void {
  if (!validShardIdentity(identity)) {
    throw new Error(
      `shard identity ${JSON.stringify(identity)} must be a DNS label of at most 63 characters (a-z, 0-9, '-')`,
    );
  }
}

/** `<host>-<random>`: the pod name where there is one, made a DNS label, unique per process. */
export function defaultShardIdentity(
  host: string = process.env['HOSTNAME'] || hostname(),
  random: () => number = Math.random,
): string {
  const base =
    host
      .toLowerCase()
      .replace(/[^a-z0-9-]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 54)
      .replace(/-+$/, '') || 'skr-agent';
  return `${base}-${random().toString(36).slice(2, 8).padEnd(6, '0')}`;
}
