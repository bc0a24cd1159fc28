// A replica's peer endpoint (decision 012) in a process of its own, so a test can read that process's descriptors
// and memory from /proc. Env: PEER_MAX_CONNECTIONS, PEER_IDLE_TIMEOUT_MS. Prints `{"port":…}` on stdout once
// listening, with the PEM CA and the agent identity a peer calls with. Answers `memory` over IPC (server-memory.ts).
import { KCP_LISTENER_IDENTITY, SHARDING } from '@skr-watcher/api';
import { startPeerServer } from '../../src/sharding/index.js';
import { createTestCa, issueTestLeaf } from './listener-certs.js';
import { answerMemoryRequests } from './server-memory.js';

const ca = createTestCa('kcp-ca');
// Client and server at once, as a replica's certificate is.
const agent = issueTestLeaf(ca, { commonName: KCP_LISTENER_IDENTITY, dnsNames: ['localhost'] });
const numberFromEnv = (name: string): number | undefined =>
  process.env[name] ? Number(process.env[name]) : undefined;

const server = await startPeerServer({
  host: '127.0.0.1',
  port: 0,
  tls: { ...agent, caBundlePem: ca.certPem },
  deliver: () => 'accepted',
  maxConnections: numberFromEnv('PEER_MAX_CONNECTIONS'),
  idleTimeoutMs: numberFromEnv('PEER_IDLE_TIMEOUT_MS'),
});
process.stdout.write(
  `${JSON.stringify({ port: server.port, caPem: ca.certPem, agent, path: SHARDING.forwardPath })}\n`,
);
answerMemoryRequests();
process.once('SIGTERM', () => void server.close().then(() => process.exit(0)));
