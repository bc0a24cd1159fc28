import { expect } from 'chai';
import { Gauge, Registry, createRegistry, startHealthServer, type HealthServer } from '../src/index.js';
import { send } from './raw-request.js';

describe('telemetry health server', () => {
  let ready = false;
  let server: HealthServer;
  const registry = createRegistry('skr_health_test_');
  new Gauge({ name: 'skr_health_test_up', help: 'test', registers: [registry] }).set(1);

  before(async () => {
    server = await startHealthServer({ host: '127.0.0.1', port: 0, registry, ready: () => ready });
  });
  after(async () => {
    await server.close();
  });

  it('answers liveness always and readiness as the process says', async () => {
    expect(await send(server.port, 'GET', '/healthz')).to.include({ status: 200, body: 'ok\n' });
    expect(await send(server.port, 'GET', '/livez')).to.include({ status: 200, body: 'ok\n' });
    expect(await send(server.port, 'GET', '/readyz')).to.include({ status: 503, body: 'not ready\n' });
    ready = true;
    expect(await send(server.port, 'GET', '/readyz')).to.include({ status: 200, body: 'ok\n' });
  });

  it('serves the registry in the Prometheus text format, HEAD without a body', async () => {
    const metrics = await send(server.port, 'GET', '/metrics');
    expect(metrics.status).to.equal(200);
    expect(metrics.headers['content-type']).to.match(/^text\/plain; version=0\.0\.4/);
    expect(metrics.body).to.match(/^skr_health_test_up 1$/m);
    const head = await send(server.port, 'HEAD', '/metrics');
    expect([head.status, head.body]).to.deep.equal([200, '']);
  });

  it('refuses other methods with 405 and Allow, other paths (exactly matched) with 404, and no banner', async () => {
    const post = await send(server.port, 'POST', '/metrics');
    expect(post.status).to.equal(405);
    expect(post.headers['allow']).to.equal('GET, HEAD');
    expect(post.body).to.match(/method POST is not allowed on \/metrics/);
    for (const path of ['/', '/metrics/', '/METRICS', '/events', '/healthz/x']) {
      expect((await send(server.port, 'GET', path)).status, path).to.equal(404);
    }
    expect(post.headers['x-powered-by']).to.equal(undefined);
  });

  it('answers 500 with the reason when a collector fails, and keeps serving', async () => {
    const failing = new Registry();
    new Gauge({
      name: 'broken',
      help: 'a collector that throws',
      registers: [failing],
      collect() {
        throw new Error('collector exploded');
      },
    });
    const broken = await startHealthServer({ host: '127.0.0.1', port: 0, registry: failing });
    try {
      const answer = await send(broken.port, 'GET', '/metrics');
      expect(answer.status).to.equal(500);
      expect(answer.body).to.match(/metrics failed: collector exploded/);
      expect((await send(broken.port, 'GET', '/healthz')).status).to.equal(200);
    } finally {
      await broken.close();
    }
  });

  it('refuses to start on a taken port with the address in the error', async () => {
    const error = await startHealthServer({ host: '127.0.0.1', port: server.port, registry }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error?.message).to.equal(`metrics server cannot listen on 127.0.0.1:${server.port}`);
    expect((error?.cause as NodeJS.ErrnoException | undefined)?.code).to.equal('EADDRINUSE');
  });
});
