// Hostile connections against a replica's peer endpoint (--peer-address) in a process of its own: the same bounds
// as the listener's (silent peers cut by the handshake bound, malformed HTTP answered and closed, a cap on open
// connections, no native memory kept after a flood), read from the process's descriptors and memory in /proc.
import { fileURLToPath } from 'node:url';
import { describeHostilePeers, type ServerProcess } from '../../test/support/descriptors.js';
import { sendCallback, tlsAgent } from './support/listener-client.js';
import { startServerScript } from './support/server-process.js';

const PEER_PROCESS = fileURLToPath(new URL('./support/peer-process.ts', import.meta.url));

interface Started {
  port: number;
  caPem: string;
  agent: { certPem: string; keyPem: string };
  path: string;
}

let identity: Started | undefined;

const forwardedEvent = JSON.stringify({
  runtimeId: 'runtime-a',
  kyma: { namespace: 'kcp-system', name: 'kyma-a' },
  component: 'lifecycle-manager',
  contract: 'v2',
  watched: { namespace: 'kyma-system', name: 'sample' },
  gvk: { group: 'operator.kyma-project.io', version: 'v1beta2', kind: 'Sample' },
  receivedAt: new Date().toISOString(),
});

async function startPeerProcess(limits: {
  maxConnections?: number;
  idleTimeoutMs: number;
}): Promise<ServerProcess> {
  const process = await startServerScript<Started>(PEER_PROCESS, {
    PEER_IDLE_TIMEOUT_MS: String(limits.idleTimeoutMs),
    ...(limits.maxConnections ? { PEER_MAX_CONNECTIONS: String(limits.maxConnections) } : {}),
  });
  const started = (identity = process.started);
  const serves = async (): Promise<number> => {
    const agent = tlsAgent({ ...started.agent, caPem: started.caPem });
    try {
      return (await sendCallback(started.port, agent, { path: started.path, body: forwardedEvent })).status;
    } finally {
      agent.destroy();
    }
  };
  await serves();
  return {
    pid: process.child.pid as number,
    port: started.port,
    serves,
    servedStatus: 202,
    stop: process.stop,
  };
}

describe('peer endpoint connections (hostile peers, descriptors and memory of the agent process)', function () {
  this.timeout(120_000);
  describeHostilePeers(startPeerProcess, () => ({
    ca: identity?.caPem,
    cert: identity?.agent.certPem,
    key: identity?.agent.keyPem,
  }));
});
