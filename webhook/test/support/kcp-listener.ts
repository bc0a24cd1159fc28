// A small KCP stand-in for tests: an HTTPS server that requires and verifies client certificates and
// records the events it accepts, with the client certificate's CN.
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { RESYNC_EVENT, parseEventPath, parseWatchEvent, type WatchEventV2 } from '@skr-watcher/api';
import type { CertificateAndKey } from './certs.js';

export interface ReceivedEvent {
  path: string;
  clientCn: string;
  event: WatchEventV2;
}

export class TestKcpListener {
  readonly received: ReceivedEvent[] = [];
  /** "Look at everything" callbacks (RESYNC_EVENT), kept apart from the events of changes. */
  readonly resyncs: ReceivedEvent[] = [];
  /** Bodies that failed the contract; a correct webhook never sends one. */
  readonly invalid: string[] = [];
  /** Status to answer with; 200 unless a test wants failures. */
  status = 200;
  private server: Server | undefined;
  private waiters: (() => void)[] = [];
  port = 0;

  constructor(
    private readonly serving: CertificateAndKey,
    private readonly caPem: string,
  ) {}

  async start(port = 0): Promise<void> {
    const server = createServer(
      {
        cert: this.serving.certPem,
        key: this.serving.keyPem,
        ca: this.caPem,
        requestCert: true,
        rejectUnauthorized: true,
      },
      (req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (chunk: Buffer) => chunks.push(chunk));
        req.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const route = parseEventPath(req.url ?? '');
          let parsed: ReturnType<typeof parseWatchEvent> | undefined;
          try {
            parsed = route && req.method === 'POST' ? parseWatchEvent('v2', JSON.parse(text)) : undefined;
          } catch {
            parsed = undefined;
          }
          if (!route || !parsed?.ok) {
            this.invalid.push(`${req.method} ${req.url} ${text}`);
            res.writeHead(400).end();
            return;
          }
          if (this.status >= 200 && this.status < 300) {
            const cert = (req.socket as TLSSocket).getPeerCertificate();
            const seen = {
              path: req.url ?? '',
              clientCn: String(cert.subject?.CN ?? ''),
              event: parsed.value,
            };
            const resync = JSON.stringify(parsed.value) === JSON.stringify(RESYNC_EVENT);
            (resync ? this.resyncs : this.received).push(seen);
            for (const wake of this.waiters.splice(0)) wake();
          }
          res.writeHead(this.status, { 'content-type': 'application/json' }).end('{}');
        });
      },
    );
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
  }

  get addr(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Stops listening and cuts every connection, as a KCP outage would. */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Resolves once `check` holds over what was received, or rejects after `timeoutMs`. */
  async waitFor(
    check: (received: ReceivedEvent[]) => boolean,
    timeoutMs: number,
    what: string,
  ): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!check(this.received)) {
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(
          `timed out after ${timeoutMs} ms waiting for ${what}; received ${JSON.stringify(this.received.map((r) => r.event.watched))}`,
        );
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 200));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }
}
