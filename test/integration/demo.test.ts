// Journey test of the one-command demo: `npm run demo -- --once` brings up planes, agent and webhooks, follows
// a Module CR edit from SKR 1 through a callback into its ModuleConfig in KCP, exits 0 and leaves nothing behind.
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

const REPO = fileURLToPath(new URL('../..', import.meta.url));

/** PIDs whose command line mentions `needle` (the demo's scratch directory is in every child's arguments). */
async function processesMentioning(needle: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.includes(needle)) pids.push(Number(entry));
  }
  return pids;
}

describe('npm run demo -- --once', function () {
  this.timeout(420_000);
  let parent: string;

  before(async () => {
    parent = await mkdtemp(join(tmpdir(), 'demo-test-'));
  });

  after(async () => {
    if (parent) await rm(parent, { recursive: true, force: true });
  });

  it('times a Module CR edit reaching its ModuleConfig through the callback, exits 0 and cleans up', async () => {
    const dir = join(parent, 'system');
    const child = spawn('npm', ['run', '--silent', 'demo', '--', '--once', '--dir', dir], {
      cwd: REPO,
      // npm puts node_modules/.bin first as well; this makes sure `npm` itself runs on the project's Node.
      env: {
        ...process.env,
        PATH: `${join(REPO, 'node_modules', '.bin')}${delimiter}${process.env['PATH']}`,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    const output = `--- stdout ---\n${stdout}\n--- stderr ---\n${stderr}`;

    expect(code, output).to.equal(0);
    expect(stdout, output).to.match(/\+\d+ ms {2}callback accepted by the KCP listener \(runtime-id skr1\)/);
    expect(stdout, output).to.match(/\+\d+ ms {2}ModuleConfig updated in KCP/);
    expect(stdout, output).to.match(/End to end \(edit sent → ModuleConfig updated in KCP\): \d+ ms/);
    expect(await readdir(dir).catch(() => 'removed'), 'scratch directory').to.equal('removed');
    expect(
      await processesMentioning(dir),
      'agent, webhooks, kube-apiservers and etcd are gone',
    ).to.deep.equal([]);
  });
});
