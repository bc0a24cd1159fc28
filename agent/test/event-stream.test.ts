import { expect } from 'chai';
import { WebSocket } from 'ws';
import { createRegistry, startHealthServer } from '@skr-watcher/telemetry';
import { runCommand } from '../src/commands/run.js';
import { agentConfigFromFlags, type RunFlags } from '../src/config.js';
import {
  createEventStream,
  formatStreamedEvent,
  serveEventStream,
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

/** The status (and body) a WebSocket handshake got instead of an upgrade. */
function refusedUpgrade(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ code: number; body: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    ws.on('open', () => {
      ws.close();
      reject(new Error(`${url} accepted the upgrade`));
    });
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString()));
      res.on('end', () => resolve({ code: res.statusCode ?? 0, body }));
    });
    ws.on('error', reject);
  });
}

describe('live event stream on its own loopback port', () => {
  it('delivers each accepted event to a tailing viewer, and refuses other upgrade paths', async () => {
    const stream = createEventStream();
    const server = await serveEventStream(stream, { host: '127.0.0.1', port: 0 });
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

  it('refuses a browser (any Origin, even its own) with 403 and a reason, and lets the CLI in', async () => {
    const stream = createEventStream();
    const server = await serveEventStream(stream, { host: '127.0.0.1', port: 0 });
    try {
      const url = `ws://127.0.0.1:${server.port}/events`;
      for (const origin of ['https://evil.example', `http://127.0.0.1:${server.port}`, 'null']) {
        const refused = await refusedUpgrade(url, { origin });
        expect(refused.code, origin).to.equal(403);
        expect(refused.body, origin).to.match(/browser requests are refused/);
      }
      expect(stream.viewers()).to.equal(0);
      const opened = new Promise<void>((resolve, reject) => {
        const ws = new WebSocket(url);
        ws.on('open', () => {
          ws.close();
          resolve();
        });
        ws.on('error', reject);
      });
      await opened;
    } finally {
      await stream.close();
      await server.close();
    }
  });

  it('answers plain HTTP on /events with 426, other methods with 405 and Allow, other paths with 404', async () => {
    const stream = createEventStream();
    const server = await serveEventStream(stream, { host: '127.0.0.1', port: 0 });
    try {
      const base = `http://127.0.0.1:${server.port}`;
      const get = await fetch(`${base}/events`);
      expect([get.status, get.headers.get('upgrade')]).to.deep.equal([426, 'websocket']);
      const post = await fetch(`${base}/events`, { method: 'POST' });
      expect([post.status, post.headers.get('allow')]).to.deep.equal([405, 'GET']);
      expect((await fetch(`${base}/metrics`)).status).to.equal(404);
    } finally {
      await stream.close();
      await server.close();
    }
  });

  it('is off the metrics port: a WebSocket to /events there gets 404', async () => {
    const health = await startHealthServer({ host: '127.0.0.1', port: 0, registry: createRegistry() });
    try {
      expect((await refusedUpgrade(`ws://127.0.0.1:${health.port}/events`)).code).to.equal(404);
    } finally {
      await health.close();
    }
  });

  it('skr-agent run binds it to loopback by default; --events-address moves it', () => {
    const flags = (argv: string[]): RunFlags => {
      const command = runCommand()
        .exitOverride()
        .action(() => {});
      command.parse(['--no-listener', ...argv], { from: 'user' });
      return command.opts<RunFlags>();
    };
    expect(agentConfigFromFlags(flags([])).eventsAddress).to.deep.equal({ host: '127.0.0.1', port: 8081 });
    expect(agentConfigFromFlags(flags(['--events-address', ':9090'])).eventsAddress).to.deep.equal({
      port: 9090,
    });
    expect(runCommand().helpInformation()).to.match(/--events-address[\s\S]*loopback by default/);
  });

  it('tailEvents rejects with the address when no agent listens', async () => {
    const error = await tailEvents('ws://127.0.0.1:1/events', () => {}).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error?.message).to.equal('connect to the event stream at ws://127.0.0.1:1/events');
  });
});
