// A hostile SKR "API server" for fault tests: a real TLS server on loopback whose answers the test chooses
// (huge bodies, silence). It plays an attacker's cluster, not Kubernetes, so it is not a fake of the API.
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { createCa, issueLeaf } from '@skr-watcher/pki';

export interface HostileSkr {
  readonly url: string;
  /** The CA that signed its serving certificate (for an API server that calls it as a webhook). */
  readonly caPem: string;
  /** A kubeconfig with inline CA data and a token, as a KCP Secret holds it. */
  readonly kubeconfig: string;
  /** Requests received so far. */
  requests(): number;
  /** Requests neither answered nor given up by the client yet. */
  pending(): number;
  close(): Promise<void>;
}

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

let certificates: { ca: string; cert: string; key: string } | undefined;

/** One CA and serving leaf for every hostile server of the process (key generation is the slow part). */
function serving(): { ca: string; cert: string; key: string } {
  if (!certificates) {
    const ca = createCa({ commonName: 'hostile-skr-ca' });
    const leaf = issueLeaf({
      ca,
      runtimeId: 'hostile-skr',
      dnsNames: ['localhost'],
      ipAddresses: ['127.0.0.1'],
    });
    certificates = { ca: ca.certPem, cert: leaf.certPem, key: leaf.keyPem };
  }
  return certificates;
}

export async function startHostileSkr(handler: Handler): Promise<HostileSkr> {
  const { ca, cert, key } = serving();
  let requests = 0;
  let pending = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer({ cert, key }, (request, response) => {
    requests += 1;
    pending += 1;
    response.on('close', () => (pending -= 1));
    handler(request, response);
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  const url = `https://127.0.0.1:${port}`;
  const kubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: hostile, cluster: {server: "${url}", certificate-authority-data: ${Buffer.from(ca).toString('base64')}}}]
users: [{name: hostile, user: {token: hostile-token}}]
contexts: [{name: hostile, context: {cluster: hostile, user: hostile}}]
current-context: hostile
`;
  return {
    url,
    caPem: ca,
    kubeconfig,
    requests: () => requests,
    pending: () => pending,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * Answers every request 200 with a JSON body of `bytes` bytes, written as fast as the client reads it (so what
 * the server managed to send is what the client accepted). `sent()` counts the bytes the client took.
 */
export function hugeBody(bytes: number): { handler: Handler; sent(): number } {
  let sent = 0;
  const chunk = Buffer.alloc(64 * 1024, 0x20); // JSON whitespace
  const handler: Handler = (_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json' });
    let left = bytes - 2;
    response.write('{');
    const pump = (): void => {
      while (left > 0) {
        const piece = left >= chunk.length ? chunk : chunk.subarray(0, left);
        left -= piece.length;
        sent += piece.length;
        if (!response.write(piece)) {
          response.once('drain', pump);
          return;
        }
      }
      response.end('}');
    };
    response.on('error', () => undefined);
    pump();
  };
  return { handler, sent: () => sent };
}

/** Accepts every request and never answers: an SKR that hangs. */
export const neverAnswers: Handler = () => undefined;

/** A kubeconfig that is not valid YAML, with `marker` as a password on the line before the error. */
export function malformedKubeconfig(marker: string): string {
  return `apiVersion: v1
kind: Config
users:
- name: u
  user:
    password: ${marker}
   token: [unclosed
`;
}
