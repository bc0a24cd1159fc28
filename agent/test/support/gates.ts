// Gates a test holds on one replica's requests (decision 012's sharding tests): a KubeConfig whose matching
// requests wait before they are sent, as when the replica's process is starved or the KCP is slow for it, and an
// SKR API server endpoint that holds every request until the test lets it answer.
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { KubeConfig, type RequestContext } from '@kubernetes/client-node';

export interface GatedRequest {
  method: string;
  url: string;
}

/** Holds matching requests until released: a replica whose requests the KCP answers late. */
export class GatedKubeConfig extends KubeConfig {
  held: ((request: GatedRequest) => boolean) | undefined;
  /** Matching requests wait this long before they go: a KCP that answers them late, every time. */
  delayed: { which: (request: GatedRequest) => boolean; ms: number } | undefined;
  passed: GatedRequest[] = [];
  private waiting: (() => void)[] = [];

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    const request = { method: context.getHttpMethod().toString(), url: context.getUrl() };
    while (this.held?.(request)) await new Promise<void>((resolve) => this.waiting.push(resolve));
    const delayed = this.delayed;
    if (delayed?.which(request)) await new Promise((resolve) => setTimeout(resolve, delayed.ms));
    this.passed.push(request);
    return super.applySecurityAuthentication(context);
  }

  hold(which: (request: GatedRequest) => boolean): void {
    this.held = which;
  }

  /** Delays every matching request by `ms` until `delay(undefined)`. */
  delay(which: ((request: GatedRequest) => boolean) | undefined, ms = 0): void {
    this.delayed = which ? { which, ms } : undefined;
  }

  /** Requests held now. */
  heldCount(): number {
    return this.waiting.length;
  }

  releaseAll(): void {
    this.held = undefined;
    for (const resolve of this.waiting.splice(0)) resolve();
  }
}

export const renewal = (r: GatedRequest) => r.method === 'PUT' && r.url.includes('/leases/');
export const ringList = (r: GatedRequest) => r.method === 'GET' && r.url.includes('/leases?');
/** A peer fencing an expired Lease (merge patch clearing its holder). */
export const fence = (r: GatedRequest) => r.method === 'PATCH' && r.url.includes('/leases/');

/** A plain-HTTP API endpoint that holds every request until `answerAll`, then answers an empty NamespaceList. */
export interface HeldSkr {
  kubeConfig: KubeConfig;
  /** Requests that reached it and wait for an answer. */
  held(): number;
  answerAll(): void;
  close(): Promise<void>;
}

export async function startHeldSkr(): Promise<HeldSkr> {
  const waiting: ServerResponse[] = [];
  const sockets = new Set<Socket>();
  const answer = (response: ServerResponse) =>
    response
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ kind: 'NamespaceList', apiVersion: 'v1', metadata: {}, items: [] }));
  let answering = false;
  const server: Server = createServer((_request, response) => {
    if (answering) answer(response);
    else waiting.push(response);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    // client-node allows plain HTTP only with skipTLSVerify; there is no TLS to verify.
    clusters: [{ name: 'held-skr', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: 'held-skr' }],
    contexts: [{ name: 'held-skr', cluster: 'held-skr', user: 'held-skr' }],
    currentContext: 'held-skr',
  });
  return {
    kubeConfig,
    held: () => waiting.filter((response) => !response.destroyed && !response.socket?.destroyed).length,
    answerAll() {
      answering = true;
      for (const response of waiting.splice(0)) if (!response.destroyed) answer(response);
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
