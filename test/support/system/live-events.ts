// Client of the agent's live event stream (ws://<events-address>/events): every accepted callback, validated.
import { WebSocket } from 'ws';
import { z } from 'zod';

const streamedEventShape = z.object({
  time: z.iso.datetime(),
  runtimeId: z.string(),
  kyma: z.string(),
  kind: z.string(),
  namespace: z.string(),
  name: z.string(),
  contract: z.enum(['v1', 'v2']),
});
export type LiveEvent = z.infer<typeof streamedEventShape> & { receivedAtMs: number };

export interface LiveEvents {
  /** Resolves once the stream is open; rejects when the agent cannot be reached. */
  readonly opened: Promise<void>;
  /** Resolves when the stream ends, by close() or because the agent went away. */
  readonly closed: Promise<void>;
  close(): Promise<void>;
}

/** One line per event: time, runtime-id, kind, namespace/name. */
export function formatLiveEvent(event: LiveEvent): string {
  const where = event.namespace ? `${event.namespace}/${event.name}` : event.name;
  return `${event.time}  ${event.runtimeId.padEnd(8)} ${event.kind.padEnd(10)} ${where}`;
}

export function connectLiveEvents(
  url: string,
  onEvent: (event: LiveEvent) => void,
  onInvalid: (reason: string) => void = () => {},
): LiveEvents {
  const ws = new WebSocket(url, { maxPayload: 64 * 1024 });
  const opened = new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', (error) =>
      reject(new Error(`connect to the agent's event stream at ${url}`, { cause: error })),
    );
  });
  // An error after the stream opened ends it; `closed` reports that.
  opened.catch(() => {});
  const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()));
  ws.on('message', (data: Buffer) => {
    const receivedAtMs = Date.now();
    let parsed;
    try {
      parsed = streamedEventShape.safeParse(JSON.parse(data.toString('utf8')));
    } catch {
      onInvalid('a message that is not JSON');
      return;
    }
    if (parsed.success) onEvent({ ...parsed.data, receivedAtMs });
    else onInvalid(z.prettifyError(parsed.error));
  });
  return {
    opened,
    closed,
    async close() {
      if (ws.readyState === WebSocket.CLOSED) return;
      ws.close(1000);
      const timer = setTimeout(() => ws.terminate(), 2_000);
      await closed;
      clearTimeout(timer);
    },
  };
}
