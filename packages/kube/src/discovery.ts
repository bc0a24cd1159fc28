// Which resource serves a kind, for KubernetesObjectApi (its URL path and whether it is namespaced), kept once per
// API server and group-version for every client of this process. client-node keeps a whole APIResourceList per
// client instance, asks again for each caller that misses at the same moment (five modules of one Kyma: five equal
// requests), and prefixes the message of the error it was given (so one shared abort reason of a pass grew with
// every aborted lookup). Here: one request at a time per server and group-version, only the three fields used kept,
// entries bounded in number and refreshed after a while (a CRD removed from the SKR is noticed), errors untouched.
import type { V1APIResource, V1APIResourceList } from '@kubernetes/client-node';

/** The part of an APIResource KubernetesObjectApi uses. */
export type ServedKind = Pick<V1APIResource, 'kind' | 'name' | 'namespaced'>;

interface Entry {
  kinds: Map<string, ServedKind>;
  fetchedAt: number;
}

export interface DiscoveryCacheOptions {
  /** Server × group-version entries kept; the least recently used goes first. */
  maxEntries?: number;
  /** An entry older than this is fetched again on its next use. */
  maxAgeMs?: number;
  now?: () => number;
}

export const DISCOVERY_DEFAULTS = { maxEntries: 4_096, maxAgeMs: 10 * 60_000 } as const;

export class DiscoveryCache {
  private readonly entries = new Map<string, Entry>();
  private readonly inFlight = new Map<string, Promise<Entry | undefined>>();
  private readonly maxEntries: number;
  private readonly maxAgeMs: number;
  private readonly now: () => number;

  constructor(options: DiscoveryCacheOptions = {}) {
    this.maxEntries = options.maxEntries ?? DISCOVERY_DEFAULTS.maxEntries;
    this.maxAgeMs = options.maxAgeMs ?? DISCOVERY_DEFAULTS.maxAgeMs;
    this.now = options.now ?? Date.now;
  }

  /**
   * The resource serving `kind` in `apiVersion` on `server`; undefined when the group-version does not serve it (or
   * is not served at all: `fetch` answered undefined). A kind the cached answer lacks is asked for again (its CRD may
   * have been installed since), by one request however many callers miss at once.
   */
  async served(
    server: string,
    apiVersion: string,
    kind: string,
    fetch: () => Promise<V1APIResourceList | undefined>,
  ): Promise<ServedKind | undefined> {
    const key = `${server}\0${apiVersion}`;
    const cached = this.entries.get(key);
    if (cached && this.now() - cached.fetchedAt < this.maxAgeMs) {
      const found = cached.kinds.get(kind);
      if (found) {
        // Most recently used last.
        this.entries.delete(key);
        this.entries.set(key, cached);
        return found;
      }
    }
    let pending = this.inFlight.get(key);
    if (!pending) {
      pending = this.fetchEntry(key, fetch).finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, pending);
    }
    return (await pending)?.kinds.get(kind);
  }

  /** Entries held (for tests and metrics). */
  get size(): number {
    return this.entries.size;
  }

  private async fetchEntry(
    key: string,
    fetch: () => Promise<V1APIResourceList | undefined>,
  ): Promise<Entry | undefined> {
    const list = await fetch();
    this.entries.delete(key);
    if (!list) return undefined;
    const kinds = new Map<string, ServedKind>();
    for (const resource of list.resources ?? []) {
      // Subresources (deployments/scale, …) name other kinds; the first resource of a kind is its own.
      if (resource.name.includes('/') || kinds.has(resource.kind)) continue;
      kinds.set(resource.kind, {
        kind: resource.kind,
        name: resource.name,
        namespaced: resource.namespaced,
      });
    }
    const entry = { kinds, fetchedAt: this.now() };
    this.entries.set(key, entry);
    if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
    return entry;
  }
}

/** The process's cache, shared by every ClusterClient (the KCP's and every SKR's). */
export const sharedDiscovery = new DiscoveryCache();
