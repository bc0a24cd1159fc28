// Certificate hot reload: Kubernetes updates Secret volumes by swapping a `..data` symlink, so the
// directories are watched (not the files) and the files re-read; a poll covers missed events.
import { X509Certificate } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { createSecureContext } from 'node:tls';
import { backoffDelay } from '@skr-watcher/api';
import type { Logger } from '@skr-watcher/telemetry';

export interface TlsFiles {
  /** Serving and client certificate (PEM, leaf first). */
  certFile: string;
  keyFile: string;
  /** Trust bundle for the KCP listener's certificate. */
  caFile: string;
}

export interface TlsMaterial {
  cert: string;
  key: string;
  ca: string;
}

/**
 * The SKR's runtime-id: the Subject CN of the webhook's own certificate (the leaf, first in the file), the identity
 * the KCP listener knows it by. Undefined when the certificate has no CN.
 */
export function runtimeIdOf(certPem: string): string | undefined {
  const subject = new X509Certificate(certPem).subject;
  return /^CN=(.+)$/m.exec(subject)?.[1];
}

/** Like readTlsMaterial, but retries for up to `waitMs`: a Secret volume may be caught between two files. */
export async function readTlsMaterialPatiently(files: TlsFiles, waitMs: number): Promise<TlsMaterial> {
  const deadline = Date.now() + waitMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await readTlsMaterial(files);
    } catch (error) {
      // No jitter: one process waiting for its own files (100 ms doubling to 1 s).
      const delay = backoffDelay(attempt, 100, 1_000, () => 1);
      if (Date.now() + delay > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}

/** Reads the three files and proves they form a usable context (key matches certificate, PEM parses). */
export async function readTlsMaterial(files: TlsFiles): Promise<TlsMaterial> {
  const read = async (path: string, what: string) => {
    try {
      return await readFile(path, 'utf8');
    } catch (cause) {
      throw new Error(`read ${what} ${path}`, { cause });
    }
  };
  // In order, so the first error names the first unusable file.
  const cert = await read(files.certFile, 'TLS certificate');
  const key = await read(files.keyFile, 'TLS key');
  const ca = await read(files.caFile, 'CA bundle');
  try {
    createSecureContext({ cert, key, ca });
  } catch (cause) {
    throw new Error(`TLS material from ${files.certFile}, ${files.keyFile}, ${files.caFile} is not usable`, {
      cause,
    });
  }
  return { cert, key, ca };
}

export interface CertificateWatcherOptions {
  files: TlsFiles;
  initial: TlsMaterial;
  /** Called with validated new material; must not throw. */
  onChange: (material: TlsMaterial) => void;
  /** Called when the files on disk cannot be used (yet); the current material stays in use. */
  onFailure?: (error: Error) => void;
  logger: Logger;
  /** Fallback poll interval; file events are the fast path. */
  pollMs: number;
  /** Wait this long after a file event before reading, so a multi-file update lands as one. */
  settleMs?: number;
}

export class CertificateWatcher {
  private current: TlsMaterial;
  private readonly watchers: FSWatcher[] = [];
  private pollTimer: NodeJS.Timeout | undefined;
  private settleTimer: NodeJS.Timeout | undefined;
  private reloading: Promise<boolean> | undefined;
  private pendingReload = false;
  private closed = false;
  /** Failed reloads in a row; retries back off so a broken Secret does not flood the log. */
  private failures = 0;
  /** Reloads that produced new material. */
  reloads = 0;

  constructor(private readonly options: CertificateWatcherOptions) {
    this.current = options.initial;
  }

  start(): void {
    const { files } = this.options;
    for (const dir of new Set([dirname(files.certFile), dirname(files.keyFile), dirname(files.caFile)])) {
      try {
        const watcher = watch(dir, { persistent: false }, () => this.scheduleReload());
        watcher.on('error', (error) => {
          this.options.logger.warn({ err: error, dir }, 'certificate directory watch failed; polling only');
        });
        this.watchers.push(watcher);
      } catch (error) {
        this.options.logger.warn({ err: error, dir }, 'cannot watch certificate directory; polling only');
      }
    }
    this.pollTimer = setInterval(() => void this.reload(), this.options.pollMs);
    this.pollTimer.unref();
  }

  close(): void {
    this.closed = true;
    for (const watcher of this.watchers) watcher.close();
    clearInterval(this.pollTimer);
    clearTimeout(this.settleTimer);
  }

  private scheduleReload(): void {
    if (this.closed) return;
    clearTimeout(this.settleTimer);
    this.settleTimer = setTimeout(() => void this.reload(), this.options.settleMs ?? 100);
    this.settleTimer.unref();
  }

  /** Re-reads the files; resolves true when new material was applied. Never rejects. */
  reload(): Promise<boolean> {
    if (this.reloading) {
      this.pendingReload = true;
      return this.reloading;
    }
    this.reloading = this.readAndApply().finally(() => {
      this.reloading = undefined;
      if (this.pendingReload && !this.closed) {
        this.pendingReload = false;
        void this.reload();
      }
    });
    return this.reloading;
  }

  private async readAndApply(): Promise<boolean> {
    if (this.closed) return false;
    let next: TlsMaterial;
    try {
      next = await readTlsMaterial(this.options.files);
    } catch (error) {
      // Mid-update (key written, certificate not yet) or removed: keep serving with what we have.
      this.options.logger.warn({ err: error }, 'certificate reload failed; keeping the current certificates');
      this.options.onFailure?.(error as Error);
      this.failures++;
      this.scheduleRetry();
      return false;
    }
    this.failures = 0;
    if (next.cert === this.current.cert && next.key === this.current.key && next.ca === this.current.ca) {
      return false;
    }
    this.current = next;
    this.reloads++;
    this.options.onChange(next);
    this.options.logger.info({ certFile: this.options.files.certFile }, 'certificates reloaded');
    return true;
  }

  private scheduleRetry(): void {
    if (this.closed) return;
    clearTimeout(this.settleTimer);
    // No jitter: one process retrying its own files.
    const delay = backoffDelay(this.failures, 1000, this.options.pollMs, () => 1);
    this.settleTimer = setTimeout(() => void this.reload(), delay);
    this.settleTimer.unref();
  }
}
