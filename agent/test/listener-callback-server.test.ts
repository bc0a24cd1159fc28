// The listener's server before any handler runs, over real sockets: malformed HTTP gets a JSON answer and a closed
// connection, connections are counted, and a port already taken fails with where it tried to listen.
import { connect } from 'node:net';
import { expect } from 'chai';
import { Registry, silentLogger } from '@skr-watcher/telemetry';
import { createCallbackServer, listenOn, type CallbackServer } from '../src/listener/callback-server.js';
import { listenerMetrics } from '../src/listener/metrics.js';

/** Sends `raw` and reads until the server closes the connection. */
function exchange(port: number, raw: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(raw));
    let text = '';
    socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
    socket.on('close', () => resolve(text));
    socket.on('error', reject);
  });
}

describe('callback server', () => {
  const servers: CallbackServer[] = [];
  let registry: Registry;
  async function start() {
    registry = new Registry();
    const server = createCallbackServer({
      mode: { kind: 'gateway', trustedProxies: ['127.0.0.1'] },
      limits: { maxConnections: 10, idleTimeoutMs: 5_000 },
      metrics: listenerMetrics(registry),
      logger: silentLogger(),
      onRequest: (_request, response) => response.end('handled'),
    });
    servers.push(server);
    return { server, port: await listenOn(server, 0, '127.0.0.1', silentLogger()) };
  }
  afterEach(async () => {
    for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
  });

  it('answers malformed HTTP in JSON and closes the connection, counting the answer by code', async () => {
    const { port } = await start();
    const text = await exchange(port, 'NOT-HTTP\r\n\r\n');
    expect(text).to.match(/^HTTP\/1\.1 400 BadRequest\r\n/);
    expect(text).to.contain('Connection: close');
    expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).to.include({
      code: 400,
      reason: 'BadRequest',
    });
    const requests = await registry.getSingleMetric('skr_listener_requests_total')?.get();
    expect(requests?.values).to.deep.include({ labels: { code: '400' }, value: 1 });
  });

  it('hands well-formed requests to the handler and counts open connections', async () => {
    const { port } = await start();
    const text = await exchange(port, 'GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect(text).to.match(/^HTTP\/1\.1 200 OK/);
    expect(text).to.contain('handled');
    const open = await registry.getSingleMetric('skr_listener_open_connections')?.get();
    expect(open?.values[0]?.value, 'closed again').to.equal(0);
  });

  it('says where it could not listen', async () => {
    const { port } = await start();
    const second = createCallbackServer({
      mode: { kind: 'gateway', trustedProxies: ['127.0.0.1'] },
      limits: { maxConnections: 10, idleTimeoutMs: 5_000 },
      metrics: listenerMetrics(new Registry()),
      logger: silentLogger(),
      onRequest: () => {},
    });
    const failure = await listenOn(second, port, '127.0.0.1', silentLogger()).then(
      () => undefined,
      (error: Error) => error.message,
    );
    expect(failure).to.equal(`listener cannot listen on 127.0.0.1:${port}`);
  });
});
