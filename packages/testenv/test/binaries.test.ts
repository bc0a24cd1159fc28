// The binaries' build lock: a build that was killed (Ctrl-C during a first run) must not leave the next run
// waiting forever for a builder that no longer exists.
import { spawn, spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { KUBERNETES_VERSION } from '../src/versions.js';

const TESTENV = fileURLToPath(new URL('..', import.meta.url));

describe('ensureBinaries build lock', function () {
  this.timeout(60_000);
  let cache: string;

  before(async () => {
    cache = await mkdtemp(join(tmpdir(), 'testenv-lock-'));
  });
  after(async () => {
    await rm(cache, { recursive: true, force: true });
  });

  it('takes over the lock of a builder that died instead of waiting for it', async () => {
    const lock = join(cache, 'skr-watcher', 'k8s', KUBERNETES_VERSION, '.building');
    await mkdir(lock, { recursive: true });
    // A pid that surely is not running: a process that has already exited.
    const gone = spawnSync(process.execPath, ['-e', '0']).pid;
    await writeFile(join(lock, 'pid'), `${gone}\n`);

    // No Go on PATH: once the lock is taken the build fails at once, which is what this test waits for.
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '--conditions=source',
        '-e',
        "import('@skr-watcher/testenv').then((t) => t.ensureBinaries()).catch((e) => { console.error(e.message); process.exit(3); })",
      ],
      {
        cwd: TESTENV,
        env: { ...process.env, XDG_CACHE_HOME: cache, KUBEBUILDER_ASSETS: '', PATH: '/usr/bin:/bin' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let output = '';
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 45_000);
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    clearTimeout(timer);

    expect(output, output).to.include('building the control-plane binaries failed');
    expect(code, output).to.equal(3);
  });
});
