// Live stream of accepted callback events over WebSocket (`GET /events`) on a server of its own, bound to
// loopback by default, and its client. It shows runtime-ids and object names without authentication, so it
// is kept off the metrics port that kubelet probes and Prometheus reach (decision 011): an operator reaches
// it in the pod (`kubectl port-forward`), and browsers are refused (a page on any site could otherwise open
// it from a machine that reaches the port).
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import { answerAndClose, closeGracefully, createHttpApp, listenOn, reply } from '@skr-watcher/telemetry';
import type { AcceptedEvent } from './listener/index.js';

export const EVENT_STREAM_PATH = '/events';
/** `skr-agent run --events-address` and `skr-agent events --address` default: loopback, beside :8080. */
export const EVENT_STREAM_ADDRESS = '127.0.0.1:8081';
/** A slow viewer is dropped rather than buffering without bound in the agent. */
const MAX_BUFFERED_BYTES = 1024 * 1024;
/** Viewers only listen; at shutdown they are cut at once, so no grace is owed. */
const CLOSE_GRACE_MS = 0;

/** What a viewer receives, one JSON message per accepted event. */
export interface StreamedEvent {
  time: string;
  runtimeId: string;
  kyma: string;
  kind: string;
  namespace: string;
  name: string;
  contract: 'v1' | 'v2';
}

export interface EventStream {
  /** Handler for a server's `upgrade` event: `/events` only, no browser (any `Origin`). */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  publish(event: AcceptedEvent): void;
  /** Calls `listener` with each event published from now on (the console's live updates); returns the unsubscribe. */
  subscribe(listener: (event: StreamedEvent) => void): () => void;
  viewers(): number;
  close(): Promise<void>;
}

export interface EventStreamServer {
  readonly port: number;
  close(): Promise<void>;
}

function refuseUpgrade(socket: Duplex, code: 403 | 404, reason: string): void {
  const body = `${reason}\n`;
  const status = code === 403 ? 'Forbidden' : 'Not Found';
  answerAndClose(
    socket,
    `HTTP/1.1 ${code} ${status}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/**
 * Serves `stream` on `host:port`: WebSocket upgrades of `/events`; a plain GET there is told to upgrade
 * (426), other methods get 405, other paths 404. Plain HTTP: it is meant for loopback.
 */
export async function serveEventStream(
  stream: EventStream,
  address: { host?: string; port: number },
): Promise<EventStreamServer> {
  const app = createHttpApp({ methods: ['GET'] });
  app.get(EVENT_STREAM_PATH, (_request, response) =>
    reply(response, 426, 'the event stream is a WebSocket: try skr-agent events\n', undefined, {
      upgrade: 'websocket',
    }),
  );
  const server: Server = createServer(app.listener);
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) =>
    stream.handleUpgrade(req, socket, head),
  );
  const port = await listenOn(server, address.host, address.port, 'event stream');
  return { port, close: () => closeGracefully(server, CLOSE_GRACE_MS) };
}

export function createEventStream(): EventStream {
  const wss = new WebSocketServer({ noServer: true, maxPayload: 1024 });
  const listeners = new Set<(event: StreamedEvent) => void>();
  return {
    handleUpgrade(req, socket, head) {
      if ((req.url ?? '').split('?')[0] !== EVENT_STREAM_PATH) {
        refuseUpgrade(socket, 404, `not found: upgrades go to ${EVENT_STREAM_PATH}`);
        return;
      }
      // Browsers always send Origin on a WebSocket handshake; the CLI never does. Same-origin is not
      // enough: a page that rebinds its DNS name to this address is same-origin with itself.
      const origin = req.headers.origin;
      if (origin !== undefined) {
        refuseUpgrade(
          socket,
          403,
          `browser requests are refused (Origin ${JSON.stringify(origin.slice(0, 200))}): the event stream is for skr-agent events`,
        );
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws) => {
        // Viewers only listen; anything they send is ignored.
        ws.on('message', () => {});
        ws.on('error', () => ws.terminate());
      });
    },
    publish(event) {
      if (wss.clients.size === 0 && listeners.size === 0) return;
      const message: StreamedEvent = {
        time: event.receivedAt.toISOString(),
        runtimeId: event.runtimeId,
        kyma: `${event.kyma.namespace}/${event.kyma.name}`,
        kind: event.gvk.kind,
        namespace: event.watched.namespace,
        name: event.watched.name,
        contract: event.contract,
      };
      for (const listener of listeners) listener(message);
      if (wss.clients.size === 0) return;
      const text = JSON.stringify(message);
      for (const client of wss.clients) {
        if (client.readyState !== WebSocket.OPEN) continue;
        if (client.bufferedAmount > MAX_BUFFERED_BYTES) client.terminate();
        else client.send(text);
      }
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    viewers: () => wss.clients.size,
    close: () =>
      new Promise<void>((resolve) => {
        for (const client of wss.clients) client.terminate();
        wss.close(() => resolve());
      }),
  };
}

/** One line per event: time, runtime-id, kind, namespace/name. */
export function formatStreamedEvent(event: StreamedEvent): string {
  const where = event.namespace ? `${event.namespace}/${event.name}` : event.name;
  return `${event.time}  ${event.runtimeId.padEnd(16)} ${event.kind.padEnd(14)} ${where}`;
}

/**
 * Connects to an agent's stream and calls `onEvent` for each event until `signal` aborts or the agent
 * closes the stream. Rejects with a clear error when the agent cannot be reached.
 */
export function tailEvents(
  url: string,
  onEvent: (event: StreamedEvent) => void,
  options: { signal?: AbortSignal; onOpen?: () => void } = {},
): Promise<void> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { maxPayload: 64 * 1024 });
    let opened = false;
    options.signal?.addEventListener('abort', () => ws.close(1000), { once: true });
    ws.on('open', () => {
      opened = true;
      options.onOpen?.();
    });
    ws.on('message', (data) => {
      try {
        const parsed = JSON.parse(data.toString()) as Partial<StreamedEvent>;
        if (typeof parsed.runtimeId === 'string' && typeof parsed.kind === 'string')
          onEvent(parsed as StreamedEvent);
      } catch {
        // A message that is not an event is skipped; the stream goes on.
      }
    });
    ws.on('error', (error) => {
      if (!opened) reject(new Error(`connect to the event stream at ${url}`, { cause: error }));
    });
    ws.on('close', () => resolve());
  });
}
