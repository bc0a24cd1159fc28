// A real OCI registry for tests and the demo: go-containerregistry's pkg/registry in the wrapper ../go/registry,
// built from the Go module proxy and cached by the wrapper's content, on a loopback port, blobs on disk.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { get as httpGet } from 'node:http';
import { get as httpsGet } from 'node:https';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureBuilt } from './binaries.js';
import { planeCertificates } from './pki.js';
import { freePort } from './ports.js';
import { startProcess, type ManagedProcess } from './processes.js';

const WRAPPER = fileURLToPath(new URL('../go/registry/', import.meta.url));
const BUILD_SCRIPT = fileURLToPath(new URL('../scripts/build-registry.sh', import.meta.url));

/** The cache directory of this wrapper's build: a change to its source or pinned versions builds anew. */
export function registryCacheDir(): string {
  const hash = createHash('sha256');
  for (const file of ['main.go', 'go.mod', 'go.sum']) hash.update(readFileSync(join(WRAPPER, file)));
  const base = process.env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache');
  return join(base, 'skr-watcher', 'registry', hash.digest('hex').slice(0, 16));
}

/** The registry binary: the cache, else a build from the Go module proxy (1–3 min cold). */
export async function ensureRegistryBinary(options: { log?: (line: string) => void } = {}): Promise<string> {
  const { paths } = await ensureBuilt({
    names: ['oci-registry'],
    what: 'the test registry (go-containerregistry)',
    script: BUILD_SCRIPT,
    lockName: '.building-registry',
    dir: registryCacheDir(),
    log: options.log,
  });
  return paths['oci-registry']!;
}

export interface RegistryOptions {
  /** Serve HTTPS with a certificate for 127.0.0.1 and localhost from a fresh CA (`ca`). Default: plain HTTP. */
  tls?: boolean;
  /** Require the Docker token flow; the token endpoint accepts these Basic credentials only. */
  auth?: { username: string; password: string };
  /** Directory for blobs, the log and certificates (default: a temporary one, removed by stop()). */
  dir?: string;
  /** Loopback address to bind (default 127.0.0.1). */
  host?: string;
  log?: (line: string) => void;
}

export interface Registry {
  /** host:port, as an image reference or `--oci-registry-host` without scheme takes it. */
  readonly host: string;
  /** `http://host:port` or `https://host:port`. */
  readonly url: string;
  /** PEM of the CA that signed the serving certificate (with `tls`). */
  readonly ca?: string;
  readonly auth?: { username: string; password: string };
  /** A `kubernetes.io/dockerconfigjson` payload with one `auths` entry for this registry (with `auth`). */
  dockerConfigJson(): string;
  /** Where the registry stores the blob of `digest` (`sha256:…`); tests damage it to get a mismatch. */
  blobPath(digest: string): string;
  readonly logFile: string;
  readonly process: ManagedProcess;
  /** SIGSTOP: the port still accepts connections but nothing answers (a hung registry). */
  pause(): void;
  /** SIGCONT after pause(). */
  resume(): void;
  stop(): Promise<void>;
}

function answers(url: string, ca: string | undefined): Promise<boolean> {
  return new Promise((resolve) => {
    const get = url.startsWith('https:') ? httpsGet : httpGet;
    const req = get(`${url}/v2/`, { ca, timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200 || res.statusCode === 401);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => req.destroy());
  });
}

/** Starts a registry on a free loopback port and waits until it answers `/v2/`. */
export async function startRegistry(options: RegistryOptions = {}): Promise<Registry> {
  const binary = await ensureRegistryBinary({ log: options.log });
  const ownDir = options.dir === undefined;
  const dir = options.dir ?? (await mkdtemp(join(tmpdir(), 'skr-registry-')));
  await mkdir(dir, { recursive: true });
  const blobs = join(dir, 'blobs');
  const logFile = join(dir, 'registry.log');
  const host = `${options.host ?? '127.0.0.1'}:${await freePort()}`;
  const args = [`-address=${host}`, `-dir=${blobs}`];
  let ca: string | undefined;
  if (options.tls) {
    const certs = planeCertificates('registry');
    ca = certs.ca.certPem;
    await writeFile(join(dir, 'tls.crt'), certs.serving.certPem);
    await writeFile(join(dir, 'tls.key'), certs.serving.keyPem, { mode: 0o600 });
    args.push(`-tls-cert=${join(dir, 'tls.crt')}`, `-tls-key=${join(dir, 'tls.key')}`);
  }
  if (options.auth) args.push(`-user=${options.auth.username}`, `-password=${options.auth.password}`);
  const child = startProcess(binary, args, logFile);
  const url = `${options.tls ? 'https' : 'http'}://${host}`;
  const stop = async () => {
    if (child.isRunning()) process.kill(child.pid, 'SIGCONT');
    await child.stop();
    if (ownDir) await rm(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + 30_000;
  while (!(await answers(url, ca))) {
    if (!child.isRunning() || Date.now() > deadline) {
      const tail = readFileSync(logFile, 'utf8').split('\n').slice(-10).join('\n');
      await stop();
      throw new Error(`the registry did not answer on ${url}; its last log lines:\n${tail}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const auth = options.auth;
  return {
    host,
    url,
    ...(ca ? { ca } : {}),
    ...(auth ? { auth } : {}),
    logFile,
    process: child,
    dockerConfigJson() {
      const entry = auth
        ? {
            username: auth.username,
            password: auth.password,
            auth: Buffer.from(`${auth.username}:${auth.password}`).toString('base64'),
          }
        : {};
      return JSON.stringify({ auths: { [host]: entry } });
    },
    blobPath(digest: string) {
      const [algorithm, hex] = digest.split(':');
      if (!algorithm || !hex || !/^[a-f0-9]+$/.test(hex)) throw new Error(`not a digest: ${digest}`);
      return join(blobs, algorithm, hex);
    },
    pause: () => process.kill(child.pid, 'SIGSTOP'),
    resume: () => process.kill(child.pid, 'SIGCONT'),
    stop,
  };
}
