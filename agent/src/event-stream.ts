// Live stream of accepted callback events over WebSocket on the admin port (`GET /events`), and its client.
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import type { AcceptedEvent } from './listener/index.js';

export const EVENT_STREAM_PATH = '/events';
/** A slow viewer is dropped rather than buffering without bound in the agent. */
const MAX_BUFFERED_BYTES = 1024 * 1024;

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
  /** Handler for the admin server's `upgrade` event. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  publish(event: AcceptedEvent): void;
  viewers(): number;
  close(): Promise<void>;
}

export function createEventStream(): EventStream {
  const wss = new WebSocketServer({ noServer: true, maxPayload: 1024 });
  return {
    handleUpgrade(req, socket, head) {
      if ((req.url ?? '').split('?')[0] !== EVENT_STREAM_PATH) {
        socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n');
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws) => {
        // Viewers only listen; anything they send is ignored.
        ws.on('message', () => {});
        ws.on('error', () => ws.terminate());
      });
    },
    publish(event) {
      if (wss.clients.size === 0) return;
      const message: StreamedEvent = {
        time: event.receivedAt.toISOString(),
        runtimeId: event.runtimeId,
        kyma: `${event.kyma.namespace}/${event.kyma.name}`,
        kind: event.gvk.kind,
        namespace: event.watched.namespace,
        name: event.watched.name,
        contract: event.contract,
      };
      const text = JSON.stringify(message);
      for (const client of wss.clients) {
        if (client.readyState !== WebSocket.OPEN) continue;
        if (client.bufferedAmount > MAX_BUFFERED_BYTES) client.terminate();
        else client.send(text);
      }
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
