// Hostile connections against the listener in a process of its own: silent peers that never send a
// ClientHello, malformed HTTP from peers that never close, and the cap on open connections. What they
// would exhaust is the process's file descriptors, so that is what the tests read, from /proc.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describeHostilePeers, type ServerProcess } from '../../test/support/descriptors.js';
import { sendCallback, tlsAgent, v2Body } from './support/listener-client.js';

const LISTENER_PROCESS = fileURLToPath(new URL('./support/listener-process.ts', import.meta.url));

interface Started {
  port: number;
  caPem: string;
  skr: { certPem: string; keyPem: string };
}

let identity: Started | undefined;

async function startListenerProcess(limits: {
  maxConnections?: number;
  idleTimeoutMs: number;
}): Promise<ServerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=source', LISTENER_PROCESS], {
    env: {
      ...process.env,
      LISTENER_IDLE_TIMEOUT_MS: String(limits.idleTimeoutMs),
      ...(limits.maxConnections ? { LISTENER_MAX_CONNECTIONS: String(limits.maxConnections) } : {}),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const end = out.indexOf('\n');
      if (end !== -1) resolve(out.slice(0, end));
    });
    child.once('exit', (code) => reject(new Error(`listener process exited (${code}) before listening`)));
  });
  const started = JSON.parse(line) as Started;
  identity = started;
  const serves = async (): Promise<number> => {
    const agent = tlsAgent({ ...started.skr, caPem: started.caPem });
    try {
      return (await sendCallback(started.port, agent, { body: v2Body('probe') })).status;
    } finally {
      agent.destroy();
    }
  };
  // One good callback first: the server is warm (TLS context, parsers) before a test reads its baseline.
  await serves();
  return {
    pid: child.pid as number,
    port: started.port,
    serves,
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

describe('listener connections (hostile peers, descriptors of the listener process)', function () {
  this.timeout(90_000);
  describeHostilePeers(startListenerProcess, () => ({
    ca: identity?.caPem,
    cert: identity?.skr.certPem,
    key: identity?.skr.keyPem,
  }));
});
