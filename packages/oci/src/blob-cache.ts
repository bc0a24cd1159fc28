// A content-addressed cache, shared by every Kyma of a process: verified bytes (and what was parsed from them)
// by digest, least recently used out first once the byte bound is reached; concurrent loads of one key share one
// pull. Nothing that failed is kept, so the next attempt pulls again.

export interface CacheStats {
  bytes: number;
  entries: number;
  hits: number;
  misses: number;
  evictions: number;
}

interface Entry {
  value: unknown;
  bytes: number;
}

export class ContentCache {
  private readonly entries = new Map<string, Entry>();
  private readonly loading = new Map<string, Promise<unknown>>();
  private bytes = 0;
  private hits = 0;
  private misses = 0;
  private evictions = 0;

  /** @param maxBytes bound of everything kept; a single value larger than it is returned but not kept. */
  constructor(readonly maxBytes: number) {}

  /**
   * The value under `key`, else what `load` gives (kept, counted as `size(value)` bytes). Keys are digests, or
   * a digest with what was derived from it (`sha256:…#objects`): a key's value never changes.
   */
  async get<T>(key: string, load: () => Promise<T>, size: (value: T) => number): Promise<T> {
    const found = this.entries.get(key);
    if (found) {
      this.hits++;
      this.entries.delete(key);
      this.entries.set(key, found); // most recently used last
      return found.value as T;
    }
    const running = this.loading.get(key);
    if (running) {
      this.hits++;
      return running as Promise<T>;
    }
    this.misses++;
    const loaded = load()
      .then((value) => {
        this.keep(key, value, size(value));
        return value;
      })
      .finally(() => this.loading.delete(key));
    this.loading.set(key, loaded);
    return loaded;
  }

  private keep(key: string, value: unknown, bytes: number): void {
    if (bytes > this.maxBytes) return;
    this.entries.set(key, { value, bytes });
    this.bytes += bytes;
    for (const [oldest, entry] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      this.entries.delete(oldest);
      this.bytes -= entry.bytes;
      this.evictions++;
    }
  }

  stats(): CacheStats {
    return {
      bytes: this.bytes,
      entries: this.entries.size,
      hits: this.hits,
      misses: this.misses,
      evictions: this.evictions,
    };
  }
}
