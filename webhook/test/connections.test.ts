// Hostile connections against the skr-webhook binary: silent peers that never send a ClientHello,
// malformed HTTP from peers that never close, and the cap on open connections. What they would exhaust
// is the process's file descriptors, so that is what the tests read, from /proc.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { freePort } from '@skr-watcher/testenv';
import { describeHostilePeers } from '../../test/support/descriptors.js';
import { SecretVolume, secretFiles, testPki, type TestPki } from './support/certs.js';
import { callWebhook, sampleReview } from './support/webhook-fixture.js';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));

interface WebhookProcess {
  child: ChildProcess;
  pid: number;
  port: number;
}

describe('skr-webhook connections (hostile peers, descriptors of the webhook process)', function () {
  this.timeout(90_000);
  let pki: TestPki;
  let leaf: ReturnType<TestPki['leaf']>;
  let volume: SecretVolume;

  before(async function () {
    pki = testPki();
    leaf = pki.leaf('skr-connections');
    volume = await SecretVolume.create(secretFiles(leaf, pki.ca.certPem));
  });

  after(async function () {
    await volume.remove();
  });

  async function startWebhookProcess(env: Record<string, string>): Promise<WebhookProcess> {
    const [port, metricsPort] = [await freePort(), await freePort()];
    const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=source', MAIN], {
      env: {
        PATH: process.env['PATH'] ?? '',
        WEBHOOK_PORT: String(port),
        METRICS_PORT: String(metricsPort),
        TLS_CERT: volume.path('tls.crt'),
        TLS_KEY: volume.path('tls.key'),
        CA_CERT: volume.path('ca.crt'),
        // Nothing is delivered in these tests; the address only has to parse.
        KCP_ADDR: '127.0.0.1:1',
        LOG_LEVEL: 'warn',
        ...env,
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const started: WebhookProcess = { child, pid: child.pid as number, port };
    // Ready once a review is answered: that also warms the TLS context before the baseline is read.
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        await review(started);
        return started;
      } catch (error) {
        if (Date.now() > deadline || child.exitCode !== null)
          throw new Error('skr-webhook did not answer a review', { cause: error });
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  }

  async function review(target: WebhookProcess): Promise<number> {
    const answer = await callWebhook(target.port, pki.ca.certPem, {
      // A no-op update: answered, but no event, so no callback attempts open sockets of their own.
      body: JSON.stringify(sampleReview('uid-1', 'UPDATE', 'sample', { replicas: 1 }, { replicas: 1 })),
    });
    return answer.status;
  }

  describeHostilePeers(
    async (limits) => {
      const started = await startWebhookProcess({
        IDLE_TIMEOUT_MS: String(limits.idleTimeoutMs),
        ...(limits.maxConnections ? { MAX_CONNECTIONS: String(limits.maxConnections) } : {}),
      });
      return {
        pid: started.pid,
        port: started.port,
        serves: () => review(started),
        stop: async () => {
          if (started.child.exitCode !== null) return;
          const exited = new Promise((resolve) => started.child.once('exit', resolve));
          started.child.kill('SIGTERM');
          await exited;
        },
      };
    },
    () => ({ ca: pki.ca.certPem }),
  );
});
