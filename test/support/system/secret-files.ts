// A kubelet-like Secret volume for processes that run outside a cluster: the keys of one Secret written to
// files, replaced by one atomic symlink swap whenever the Secret changes, so certificate renewals and CA
// rotations reach the webhook's (and the listener's) hot reload exactly as a mounted Secret would.
//
// Layout, as kubelet's atomic writer makes it:
//   <dir>/..data -> ..2026-11-22T00-40-00-123Z-ab12      (swapped by rename, which is atomic)
//   <dir>/..2026-11-22T00-40-00-123Z-ab12/tls.crt
//   <dir>/tls.crt -> ..data/tls.crt                       (the stable path handed to the process)
import { randomBytes } from 'node:crypto';
import { mkdir, readlink, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { KubeConfig, V1Secret } from '@kubernetes/client-node';
import { ResilientInformer, secretSource } from '@skr-watcher/kube';

export interface SecretFilesOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  name: string;
  /** The keys that must all be present before anything is written. */
  keys: string[];
  dir: string;
  /** Called after each swap with the number of writes so far. */
  onWrite?: (writes: number) => void;
  /** Called when a swap fails; the files keep their previous content. */
  onError?: (error: Error) => void;
}

export interface SecretFiles {
  /** The stable path of one key's file. */
  path(key: string): string;
  /** Resolves after the first complete write; rejects after `timeoutMs`. */
  firstWrite(timeoutMs: number): Promise<void>;
  /** Resolves once the Secret as it was at start has been seen (the first list is handled). */
  synced(): Promise<void>;
  writes(): number;
  stop(): Promise<void>;
}

const DATA_LINK = '..data';

export function syncSecretToFiles(options: SecretFilesOptions): SecretFiles {
  const informer = new ResilientInformer<V1Secret>({
    kubeConfig: options.kubeConfig,
    source: secretSource(options.kubeConfig, { namespace: options.namespace }),
    // Only the watched Secret matters; other Secrets of the namespace are trimmed to their metadata.
    transform: (secret) => (secret.metadata?.name === options.name ? secret : { metadata: secret.metadata }),
    watchdogMs: 60_000,
  });
  let writes = 0;
  let lastContent = '';
  let queue: Promise<void> = Promise.resolve();
  const waiters: (() => void)[] = [];

  const write = async (data: Record<string, string>) => {
    const content = JSON.stringify(options.keys.map((key) => data[key]));
    if (content === lastContent) return;
    await mkdir(options.dir, { recursive: true });
    const stamp = new Date().toISOString().replace(/[:.]/g, '-');
    const version = `..${stamp}-${randomBytes(2).toString('hex')}`;
    await mkdir(join(options.dir, version), { mode: 0o700 });
    for (const key of options.keys) {
      // Everything here may be a private key: owner-only, as `skr-certs` writes key files.
      await writeFile(join(options.dir, version, key), Buffer.from(data[key] as string, 'base64'), {
        mode: 0o600,
      });
    }
    const previous = await readlink(join(options.dir, DATA_LINK)).catch(() => undefined);
    const staging = join(options.dir, `${DATA_LINK}_tmp`);
    await rm(staging, { force: true });
    await symlink(version, staging);
    await rename(staging, join(options.dir, DATA_LINK));
    for (const key of options.keys) {
      await symlink(join(DATA_LINK, key), join(options.dir, key)).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== 'EEXIST') throw error;
      });
    }
    if (previous) await rm(join(options.dir, previous), { recursive: true, force: true });
    lastContent = content;
    writes += 1;
    options.onWrite?.(writes);
    for (const wake of waiters.splice(0)) wake();
  };

  const consider = (secret: V1Secret) => {
    if (secret.metadata?.name !== options.name) return;
    const data = secret.data ?? {};
    if (options.keys.some((key) => !data[key])) return;
    queue = queue
      .then(() => write(data))
      .catch((cause: unknown) =>
        options.onError?.(
          new Error(`write Secret ${options.namespace}/${options.name} to ${options.dir}`, { cause }),
        ),
      );
  };
  informer.addHandler({ onAdd: consider, onUpdate: (_, secret) => consider(secret) });
  informer.start();

  return {
    path: (key) => join(options.dir, key),
    writes: () => writes,
    synced: () => informer.waitForSync(),
    firstWrite(timeoutMs) {
      if (writes > 0) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () =>
            reject(
              new Error(
                `Secret ${options.namespace}/${options.name} with keys ${options.keys.join(', ')} did not appear within ${Math.round(timeoutMs / 1000)} s`,
              ),
            ),
          timeoutMs,
        );
        waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
    async stop() {
      await informer.stop();
      await queue;
    },
  };
}
