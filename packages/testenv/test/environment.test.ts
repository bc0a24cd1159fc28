// The environment supervises its kube-apiservers as a kubelet would: one that exits before it is ready is started
// again (kube-apiserver ends itself when a start-up hook fails and leaves the restart to its supervisor).
import { readdir, readFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { expect } from 'chai';
import { startEnvironment } from '../src/environment.js';
import { liveChildPids } from '../src/processes.js';

/** PIDs of the processes whose command line holds `marker`. */
async function pidsWith(marker: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.split('\0').includes(marker)) pids.push(Number(entry));
  }
  return pids;
}

/** SIGKILLs each new kube-apiserver started with `marker` in its arguments, `times` times; stop() ends the watch. */
function killStarts(marker: string, times: number) {
  const killed = new Set<number>();
  let stopped = false;
  const done = (async () => {
    while (!stopped && killed.size < times) {
      for (const pid of await pidsWith(marker)) {
        if (killed.has(pid)) continue;
        killed.add(pid);
        process.kill(pid, 'SIGKILL');
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  return {
    killed,
    stop: async () => {
      stopped = true;
      await done;
    },
  };
}

describe('testenv control planes', function () {
  this.timeout(600_000); // a cold cache builds kube-apiserver and etcd first

  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'skr-testenv-test-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('starts a kube-apiserver again when it exits before it is ready, and says so', async () => {
    const lines: string[] = [];
    const killer = killStarts(`--cert-dir=${join(dir, 'flaky')}`, 1);
    const env = await startEnvironment({ planes: ['flaky'], dir, log: (line) => lines.push(line) }).finally(
      () => killer.stop(),
    );
    try {
      expect(killer.killed.size, 'kube-apiservers killed during the start').to.equal(1);
      expect(lines.join('\n')).to.match(
        /kube-apiserver flaky exited before it was ready .*; starting it again/,
      );
      const namespaces = await env.plane('flaky').kubeConfig().makeApiClient(CoreV1Api).listNamespace();
      expect(namespaces.items.map((ns) => ns.metadata?.name)).to.include('default');
    } finally {
      await env.stop();
    }
  });

  it('gives up after three starts that exit, naming the cause, and leaves no process behind', async () => {
    const before = liveChildPids();
    const killer = killStarts(`--cert-dir=${join(dir, 'doomed')}`, 3);
    const failure = await startEnvironment({ planes: ['doomed'], dir }).then(
      (env) => env.stop().then(() => undefined),
      (error: unknown) => error,
    );
    await killer.stop();
    expect(killer.killed.size).to.equal(3);
    expect(String(failure)).to.match(
      /kube-apiserver doomed exited before it was ready \(.+\); see .*kube-apiserver\.log/,
    );
    expect(liveChildPids()).to.deep.equal(before);
  });
});
