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
  const found = await ensureBuilt({
    names: ['kube-apiserver', 'etcd'],
    what: 'the control-plane binaries',
    script: BUILD_SCRIPT,
    lockName: '.building',
    log: options.log,
  });
  return { kubeApiserver: found.paths['kube-apiserver']!, etcd: found.paths['etcd']!, source: found.source };
}

interface BuildRequest {
  /** Binary names that must all be executable in one directory. */
  names: string[];
  what: string;
  script: string;
  /** One lock per script: two different builds may run at once, the same one never twice. */
  lockName: string;
  log?: (line: string) => void;
  /** Where the binaries are cached (default: the Kubernetes-version-keyed cacheDir()). */
  dir?: string;
}

async function allIn(dir: string, names: string[]): Promise<Record<string, string> | undefined> {
  const paths: Record<string, string> = {};
  for (const name of names) {
    const path = join(dir, name);
    if (!(await executable(path))) return undefined;
    paths[name] = path;
  }
  return paths;
}

/** KUBEBUILDER_ASSETS, then the version-keyed cache, else one shared build (lock dir) into the cache. */
export async function ensureBuilt(
  request: BuildRequest,
): Promise<{ paths: Record<string, string>; source: Binaries['source'] }> {
  const assets = process.env['KUBEBUILDER_ASSETS'];
  if (assets) {
    const found = await allIn(assets, request.names);
    if (found) return { paths: found, source: 'KUBEBUILDER_ASSETS' };
    if (request.lockName === '.building') {
      throw new Error(`KUBEBUILDER_ASSETS=${assets} holds no executable kube-apiserver and etcd`);
    }
  }
  const dir = request.dir ?? cacheDir();
  const cached = await allIn(dir, request.names);
  if (cached) return { paths: cached, source: 'cache' };

  await mkdir(dir, { recursive: true });
  const lock = join(dir, request.lockName);
  const log = request.log ?? ((line: string) => process.stderr.write(line + '\n'));
  let waited = 0;
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
      waited += 2;
      if (waited % 60 === 0)
        log(`[testenv] waiting ${waited} s for another process building ${request.what}`);
      const built = await allIn(dir, request.names);
      if (built) return { paths: built, source: 'cache' };
    }
  }
  try {
    log(`[testenv] building ${request.what} from the Go module proxy (none cached in ${dir})`);
    await new Promise<void>((resolve, reject) => {
      const child = spawn('bash', [request.script, dir], { stdio: ['ignore', 'inherit', 'inherit'] });
      child.on('error', reject);
      child.on('exit', (code) =>
        code === 0 ? resolve() : reject(new Error(`building ${request.what} failed (exit ${code})`)),
      );
    });
  } finally {
    await rm(lock, { recursive: true, force: true });
  }
  const built = await allIn(dir, request.names);
  if (!built) throw new Error(`the build finished but ${dir} lacks one of ${request.names.join(', ')}`);
  return { paths: built, source: 'built' };
}
