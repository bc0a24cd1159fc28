// A callback listener in a process of its own, so a test can read that process's descriptors from /proc.
// Env: LISTENER_MAX_CONNECTIONS, LISTENER_IDLE_TIMEOUT_MS. Prints `{"port":…}` on stdout once listening,
// then the PEM CA and an SKR identity a test can call with. Answers `memory` over IPC (server-memory.ts).
import { startListener } from '../../src/listener/index.js';
import { createTestCa, issueListenerServingCert, issueTestLeaf } from './listener-certs.js';
import { answerMemoryRequests } from './server-memory.js';

const ca = createTestCa('kcp-ca');
const serving = issueListenerServingCert(ca);
const skr = issueTestLeaf(ca, { commonName: 'runtime-a', dnsNames: ['skr-a.example.com'] });
const numberFromEnv = (name: string): number | undefined =>
  process.env[name] ? Number(process.env[name]) : undefined;

const listener = await startListener({
  host: '127.0.0.1',
  port: 0,
  mode: { kind: 'direct', ...serving, caBundlePem: ca.certPem },
  resolveKyma: (runtimeId) =>
    runtimeId === 'runtime-a' ? { namespace: 'kcp-system', name: 'kyma-a' } : undefined,
  enqueue: () => undefined,
  maxConnections: numberFromEnv('LISTENER_MAX_CONNECTIONS'),
  idleTimeoutMs: numberFromEnv('LISTENER_IDLE_TIMEOUT_MS'),
});
process.stdout.write(`${JSON.stringify({ port: listener.port, caPem: ca.certPem, skr })}\n`);
answerMemoryRequests();
process.once('SIGTERM', () => void listener.close().then(() => process.exit(0)));
