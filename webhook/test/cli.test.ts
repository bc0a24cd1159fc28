// Journey tests of the skr-webhook binary: help, configuration errors, start, SIGTERM.
import { spawn, spawnSync } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { getPriority } from 'node:os';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { freePort } from '@skr-watcher/testenv';
import { SecretVolume, secretFiles, testPki } from './support/certs.js';
import { TestKcpListener } from './support/kcp-listener.js';
import { callWebhook, getMetricsPort, sampleReview } from './support/webhook-fixture.js';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
/** Linux scheduling policies by number (sched.h). */
const POLICIES: Record<number, string> = { 0: 'normal', 3: 'batch', 5: 'idle' };

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runWebhook(
  args: string[],
  env: Record<string, string>,
  onStarted?: (kill: () => void, pid: number) => Promise<void>,
  /** Runs the webhook under this command, e.g. `['nice', '-n', '5']` (which execs it: same pid). */
  wrapper: string[] = [],
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const node = [process.execPath, '--import', 'tsx', '--conditions=source', MAIN, ...args];
    const [command, ...rest] = [...wrapper, ...node] as [string, ...string[]];
    const child = spawn(command, rest, {
      env: { PATH: process.env['PATH'] ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let started = false;
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (!started && stdout.includes('skr-webhook started') && onStarted) {
        started = true;
        onStarted(() => child.kill('SIGTERM'), child.pid as number).catch((error: unknown) => {
          child.kill('SIGKILL');
          reject(error as Error);
        });
      }
    });
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The upstream environment variables of a webhook serving from `volume` and calling `kcp`. */
function upstreamEnv(volume: SecretVolume, kcp: TestKcpListener, webhookPort: number, metricsPort: number) {
  return {
    WEBHOOK_PORT: String(webhookPort),
    METRICS_PORT: String(metricsPort),
    TLS_CERT: volume.path('tls.crt'),
    TLS_KEY: volume.path('tls.key'),
    CA_CERT: volume.path('ca.crt'),
    KCP_ADDR: kcp.addr,
  };
}

describe('skr-webhook binary', function () {
  this.timeout(60_000);

  it('--help documents every env var and flag', async () => {
    const run = await runWebhook(['--help'], {});
    expect(run.code).to.equal(0);
    for (const name of [
      'WEBHOOK_PORT',
      'METRICS_PORT',
      'TLS_CERT',
      'TLS_KEY',
      'CA_CERT',
      'KCP_ADDR',
      'KCP_CONTRACT',
    ]) {
      expect(run.stdout).to.contain(name);
    }
    for (const flag of [
      '--webhook-port',
      '--tls-cert',
      '--kcp-addr',
      '--dispatch-workers',
      '--event-max-age-ms',
    ]) {
      expect(run.stdout).to.contain(flag);
    }
  });

  it('refuses to start without TLS files and KCP address, naming what is missing', async () => {
    const run = await runWebhook([], {});
    expect(run.code).to.equal(1);
    expect(run.stderr).to.contain('missing required settings');
    expect(run.stderr).to.contain('TLS_CERT');
    expect(run.stderr).to.contain('KCP_ADDR');
  });

  it('refuses an unsupported contract and a bad port with a clear message', async () => {
    const contract = await runWebhook(['--kcp-contract', 'v1'], {});
    expect(contract.code).to.equal(1);
    expect(contract.stderr).to.contain('supported contract');
    const port = await runWebhook([], { WEBHOOK_PORT: 'eighty' });
    expect(port.code).to.equal(1);
    expect(port.stderr).to.contain('WEBHOOK_PORT');
  });

  it('fails with a JSON log line naming the file when a certificate file is missing', async () => {
    const run = await runWebhook([], {
      TLS_CERT: '/nonexistent/tls.crt',
      TLS_KEY: '/x',
      CA_CERT: '/y',
      KCP_ADDR: '127.0.0.1:1',
      WEBHOOK_PORT: '0',
      METRICS_PORT: '0',
    });
    expect(run.code).to.equal(1);
    const line = JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}') as {
      level?: string;
      err?: { message?: string };
    };
    expect(line.level).to.equal('fatal');
    expect(line.err?.message).to.contain('/nonexistent/tls.crt');
  });

  it('starts from env vars, serves a review, delivers the event, and exits 0 on SIGTERM', async () => {
    const pki = testPki();
    const leaf = pki.leaf('skr-binary');
    const kcp = new TestKcpListener(pki.listener(), pki.ca.certPem);
    await kcp.start();
    const volume = await SecretVolume.create(secretFiles(leaf, pki.ca.certPem));
    const [webhookPort, metricsPort] = [await freePort(), await freePort()];
    try {
      const run = await runWebhook(
        [],
        { ...upstreamEnv(volume, kcp, webhookPort, metricsPort), KCP_CONTRACT: 'v2' },
        async (kill) => {
          const answer = await callWebhook(webhookPort, pki.ca.certPem, {
            body: JSON.stringify(sampleReview('bin-1', 'CREATE', 'from-binary')),
          });
          expect(answer.status).to.equal(200);
          await kcp.waitFor(
            (r) => r.some((e) => e.event.watched.Name === 'from-binary'),
            10_000,
            'event from the binary',
          );
          expect((await getMetricsPort(metricsPort, '/readyz')).status).to.equal(200);
          kill();
        },
      );
      expect(run.code, run.stderr).to.equal(0);
      const lines = run.stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(lines.map((l) => l['msg'])).to.include.members([
        'skr-webhook started',
        'shutting down',
        'skr-webhook stopped',
      ]);
      expect(lines.every((l) => l['component'] === 'skr-webhook')).to.equal(true);
    } finally {
      await kcp.stop();
      await volume.remove();
    }
  });

  /**
   * Starts the webhook (under `wrapper`, with `path` as PATH) and watches its threads until the dispatch thread is
   * `expected` and the SCHED_IDLE gauge reads `gauge`, for at most 5 s; returns what it saw last and the run.
   */
  async function watchThreads(expected: string, gauge: string, path: string, wrapper: string[]) {
    const pki = testPki();
    const kcp = new TestKcpListener(pki.listener(), pki.ca.certPem);
    await kcp.start();
    const volume = await SecretVolume.create(secretFiles(pki.leaf('skr-nice'), pki.ca.certPem));
    const [webhookPort, metricsPort] = [await freePort(), await freePort()];
    /** Nice value and scheduling policy of every thread (fields 19 and 41 of /proc/<pid>/task/<tid>/stat). */
    const threads = async (pid: number) => {
      const tasks = await readdir(`/proc/${pid}/task`);
      const stats = await Promise.all(tasks.map((tid) => readFile(`/proc/${pid}/task/${tid}/stat`, 'utf8')));
      return stats.map((stat) => {
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        return `nice ${fields[16]} policy ${POLICIES[Number(fields[38])] ?? fields[38]}`;
      });
    };
    const idleGauge = async () =>
      /^skr_webhook_dispatch_thread_sched_idle (\d)$/m.exec(
        await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text(),
      )?.[1];
    const seen = { threads: [] as string[], gauge: undefined as string | undefined };
    try {
      const run = await runWebhook(
        [],
        { ...upstreamEnv(volume, kcp, webhookPort, metricsPort), PATH: path },
        async (kill, pid) => {
          // The dispatch thread sets its own scheduling as it starts; give it a moment on a busy machine.
          for (let attempt = 0; attempt < 50; attempt++) {
            seen.threads = [...new Set(await threads(pid))];
            seen.gauge = await idleGauge();
            if (seen.threads.includes(expected) && seen.gauge === gauge) break;
            await new Promise((resolve) => setTimeout(resolve, 100));
          }
          kill();
        },
        wrapper,
      );
      expect(run.code, run.stderr).to.equal(0);
      return { ...seen, run };
    } finally {
      await kcp.stop();
      await volume.remove();
    }
  }

  it('runs its dispatch thread SCHED_IDLE and ten nice levels above the process, whatever nice value it was started with', async function () {
    if (process.platform !== 'linux' || spawnSync('chrt', ['--version']).status !== 0) this.skip();
    // `nice -n 5` adds 5 to this runner's own nice value (0 unless CI runs it otherwise).
    const started = Math.min(19, getPriority() + 5);
    const dispatch = `nice ${Math.min(19, started + 10)} policy idle`;
    const seen = await watchThreads(dispatch, '1', process.env['PATH'] ?? '', ['nice', '-n', '5']);
    // The process's threads at 5, the dispatch thread alone SCHED_IDLE and at 5 + 10 (an absolute nice value would
    // give 10).
    expect(seen.threads).to.have.members([`nice ${started} policy normal`, dispatch]);
    expect(seen.gauge, 'skr_webhook_dispatch_thread_sched_idle').to.equal('1');
  });

  it('keeps the nice value alone, and says so, where chrt is missing', async function () {
    if (process.platform !== 'linux') this.skip();
    const dispatch = `nice ${Math.min(19, getPriority() + 10)} policy normal`;
    const seen = await watchThreads(dispatch, '0', '/nonexistent', []);
    expect(seen.threads).to.have.members([`nice ${getPriority()} policy normal`, dispatch]);
    expect(seen.gauge, 'skr_webhook_dispatch_thread_sched_idle').to.equal('0');
    expect(seen.run.stdout).to.contain('SCHED_IDLE could not be set');
  });
});
