// Finds kube-apiserver and etcd: KUBEBUILDER_ASSETS, then the version-keyed cache, else builds them.
import { spawn } from 'node:child_process';
import { access, constants, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KUBERNETES_VERSION } from './versions.js';

export interface Binaries {
  kubeApiserver: string;
  etcd: string;
  /** Where they came from, for logs. */
  source: 'KUBEBUILDER_ASSETS' | 'cache' | 'built';
}

const BUILD_SCRIPT = fileURLToPath(new URL('../scripts/build-binaries.sh', import.meta.url));

export function cacheDir(): string {
  const base = process.env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache');
  return join(base, 'skr-watcher', 'k8s', KUBERNETES_VERSION);
}

async function executable(path: string): Promise<boolean> {
  try {
    await access(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

async function pair(dir: string): Promise<{ kubeApiserver: string; etcd: string } | undefined> {
  const kubeApiserver = join(dir, 'kube-apiserver');
  const etcd = join(dir, 'etcd');
  return (await executable(kubeApiserver)) && (await executable(etcd)) ? { kubeApiserver, etcd } : undefined;
}

/** Whether a build lock's owner has died; a lock without an owner yet is its owner's only for a minute. */
async function abandoned(lock: string): Promise<boolean> {
  const pid = Number((await readFile(join(lock, 'pid'), 'utf8').catch(() => '')).trim());
  if (!Number.isInteger(pid) || pid <= 0) {
    const made = await stat(lock).then(
      (s) => s.mtimeMs,
      () => undefined,
    );
    return made !== undefined && Date.now() - made > 60_000;
  }
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/**
 * Returns runnable binaries, building them from the Go module proxy when neither
 * KUBEBUILDER_ASSETS nor the cache has them. Concurrent callers share one build through a lock dir.
 */
export async function ensureBinaries(options: { log?: (line: string) => void } = {}): Promise<Binaries> {
  const assets = process.env['KUBEBUILDER_ASSETS'];
  if (assets) {
    const found = await pair(assets);
    if (!found) throw new Error(`KUBEBUILDER_ASSETS=${assets} holds no executable kube-apiserver and etcd`);
    return { ...found, source: 'KUBEBUILDER_ASSETS' };
  }
  const dir = cacheDir();
  const cached = await pair(dir);
  if (cached) return { ...cached, source: 'cache' };

  await mkdir(dir, { recursive: true });
  const lock = join(dir, '.building');
  for (;;) {
    try {
      await mkdir(lock);
      await writeFile(join(lock, 'pid'), `${process.pid}\n`);
      break;
    } catch {
      // Another process is building; wait for it rather than building twice, unless it died (a Ctrl-C
      // during a first build must not leave the next run waiting forever).
      if (await abandoned(lock)) {
        await rm(lock, { recursive: true, force: true });
        continue;
      }
      await new Promise((resolve) => setTimeout(resolve, 2000));
      const built = await pair(dir);
      if (built) return { ...built, source: 'cache' };
    }
  }
  try {
    (options.log ?? ((line) => process.stderr.write(line + '\n')))(
      `[testenv] no cached kube-apiserver ${KUBERNETES_VERSION}; building from the Go module proxy`,
    );
    await new Promise<void>((resolve, reject) => {
      const child = spawn('bash', [BUILD_SCRIPT, dir], { stdio: ['ignore', 'inherit', 'inherit'] });
      child.on('error', reject);
      child.on('exit', (code) =>
        code === 0
          ? resolve()
          : reject(new Error(`building the control-plane binaries failed (exit ${code})`)),
      );
    });
  } finally {
    await rm(lock, { recursive: true, force: true });
  }
  const built = await pair(dir);
  if (!built) throw new Error(`the build finished but ${dir} holds no kube-apiserver and etcd`);
  return { ...built, source: 'built' };
}
