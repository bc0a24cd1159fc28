import { expect } from 'chai';
import { WebSocket } from 'ws';
import { createRegistry, startHealthServer } from '@skr-watcher/telemetry';
import {
  createEventStream,
  formatStreamedEvent,
  tailEvents,
  type StreamedEvent,
} from '../src/event-stream.js';

const accepted = {
  runtimeId: 'skr-a',
  kyma: { namespace: 'kcp-system', name: 'kyma-a' },
  component: 'lifecycle-manager',
  contract: 'v2' as const,
  watched: { namespace: 'kyma-system', name: 'sample' },
  gvk: { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Sample' },
  receivedAt: new Date('2026-11-21T10:00:00.000Z'),
};

describe('live event stream on the admin port', () => {
  it('delivers each accepted event to a tailing viewer, and refuses other upgrade paths', async () => {
    const stream = createEventStream();
    const server = await startHealthServer({
      host: '127.0.0.1',
      port: 0,
      registry: createRegistry(),
      onUpgrade: (req, socket, head) => stream.handleUpgrade(req, socket, head),
    });
    try {
      const received: StreamedEvent[] = [];
      const abort = new AbortController();
      const opened = new Promise<void>((resolve) => {
        void tailEvents(`ws://127.0.0.1:${server.port}/events`, (e) => received.push(e), {
          signal: abort.signal,
          onOpen: resolve,
        });
      });
      await opened;
      stream.publish(accepted);
      for (let i = 0; i < 50 && received.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
      abort.abort();
      expect(received).to.deep.equal([
        {
          time: '2026-11-21T10:00:00.000Z',
          runtimeId: 'skr-a',
          kyma: 'kcp-system/kyma-a',
          kind: 'Sample',
          namespace: 'kyma-system',
          name: 'sample',
          contract: 'v2',
        },
      ]);
      expect(formatStreamedEvent(received[0] as StreamedEvent)).to.match(
        /skr-a\s+Sample\s+kyma-system\/sample$/,
      );

      const refused = await new Promise<string>((resolve) => {
        const ws = new WebSocket(`ws://127.0.0.1:${server.port}/metrics`);
        ws.on('unexpected-response', (_req, res) => resolve(String(res.statusCode)));
        ws.on('error', (e) => resolve(e.message));
      });
      expect(refused).to.equal('404');
    } finally {
      await stream.close();
      await server.close();
    }
  });

  it('tailEvents rejects with the address when no agent listens', async () => {
    const error = await tailEvents('ws://127.0.0.1:1/events', () => {}).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error?.message).to.equal('connect to the event stream at ws://127.0.0.1:1/events');
  });
});
