// The admission endpoint over real TLS: answers, refusals, metrics, delivery to an mTLS KCP, fuzzing.
import { connect } from 'node:tls';
import { expect } from 'chai';
import fc from 'fast-check';
import { ADMISSION_ALLOWED_MESSAGE } from '@skr-watcher/api';
import {
  startWebhookFixture,
  callWebhook,
  getMetricsPort,
  metricValue,
  sampleReview,
  type WebhookFixture,
} from './support/webhook-fixture.js';

describe('admission server', function () {
  this.timeout(60_000);
  let fx: WebhookFixture;

  before(async () => {
    fx = await startWebhookFixture({ maxBodyBytes: 64 * 1024 });
  });
  after(async () => {
    await fx?.stop();
  });

  const call = (init: Parameters<typeof callWebhook>[2]) =>
    callWebhook(fx.webhook.webhookPort, fx.pki.ca.certPem, init);

  it('answers allowed=true with the uid in admission.k8s.io/v1, and the KCP gets the v2 event over mTLS', async () => {
    const answer = await call({ body: JSON.stringify(sampleReview('uid-create-1', 'CREATE', 'created-1')) });
    expect(answer.status).to.equal(200);
    expect(answer.headers['content-type']).to.equal('application/json');
    // As upstream's webhook answers: HSTS and a CSP that lets nothing load.
    expect(answer.headers['strict-transport-security']).to.equal('max-age=31536000; includeSubDomains');
    expect(answer.headers['content-security-policy']).to.equal("default-src 'none'; frame-ancestors 'none'");
    expect(JSON.parse(answer.body)).to.deep.equal({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: { uid: 'uid-create-1', allowed: true, result: { message: ADMISSION_ALLOWED_MESSAGE } },
    });
    await fx.kcp.waitFor(
      (r) => r.some((e) => e.event.watched.Name === 'created-1'),
      5_000,
      'event for created-1',
    );
    const received = fx.kcp.received.find((e) => e.event.watched.Name === 'created-1');
    expect(received).to.deep.equal({
      path: '/v2/lifecycle-manager/event',
      clientCn: 'skr-test-runtime',
      event: {
        watched: { Namespace: 'kyma-system', Name: 'created-1' },
        watchedGvk: { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Sample' },
      },
    });
  });

  it('accepts the ?timeout= query the API server appends and routes by the manager in the path', async () => {
    const answer = await call({
      path: '/validate/other-manager?timeout=10s',
      body: JSON.stringify(sampleReview('uid-q', 'DELETE', 'deleted-q')),
    });
    expect(answer.status).to.equal(200);
    await fx.kcp.waitFor(
      (r) => r.some((e) => e.path === '/v2/other-manager/event'),
      5_000,
      'event for other-manager',
    );
  });

  it('answers a no-op update but sends nothing', async () => {
    const before = fx.webhook.dispatchStats.enqueued + fx.webhook.dispatchStats.coalesced;
    const answer = await call({
      body: JSON.stringify(sampleReview('uid-noop', 'UPDATE', 'noop', { replicas: 1 }, { replicas: 1 })),
    });
    expect(answer.status).to.equal(200);
    expect(fx.webhook.dispatchStats.enqueued + fx.webhook.dispatchStats.coalesced).to.equal(before);
  });

  it('answers a review naming an object the callback contract cannot carry, and sends nothing', async () => {
    const before = fx.webhook.dispatchStats.dropped.invalid;
    const answer = await call({ body: JSON.stringify(sampleReview('uid-bad-name', 'CREATE', 'Not_A_Name')) });
    expect(answer.status).to.equal(200);
    // The dispatch thread has taken every change answered so far once this resolves.
    await fx.webhook.queueDepth();
    expect(fx.webhook.dispatchStats.dropped.invalid).to.equal(before + 1);
    const metrics = await getMetricsPort(fx.webhook.metricsPort, '/metrics');
    expect(metricValue(metrics.body, 'skr_webhook_events_dropped_total{reason="invalid"}')).to.equal(
      before + 1,
    );
  });

  it('answers malformed JSON with 400 and a reason', async () => {
    const answer = await call({ body: '{"apiVersion":' });
    expect(answer.status).to.equal(400);
    expect(answer.body).to.match(/^body is not JSON: /);
  });

  it('answers a JSON body that is not an AdmissionReview with 400 naming the field', async () => {
    const review = sampleReview('', 'CREATE', 'x');
    const answer = await call({ body: JSON.stringify(review) });
    expect(answer.status).to.equal(400);
    expect(answer.body).to.contain('request.uid');
  });

  it('answers 405 to GET and 404 to other paths', async () => {
    const get = await call({ method: 'GET' });
    expect(get.status).to.equal(405);
    expect(get.headers['allow']).to.equal('POST');
    const other = await call({ path: '/mutate/x', body: '{}' });
    expect(other.status).to.equal(404);
  });

  it('after a 404 to a request whose body drips in slowly, closes the connection instead of reading on', async () => {
    const outcome = await new Promise<string>((resolve) => {
      const socket = connect({ host: '127.0.0.1', port: fx.webhook.webhookPort, ca: fx.pki.ca.certPem });
      let answer = '';
      let drip: NodeJS.Timeout | undefined;
      // A client dripping a 1 MB body at 10 bytes a second would take a day; stop after 15 s either way.
      const giveUp = setTimeout(() => {
        clearInterval(drip);
        socket.destroy();
        resolve(`still open after 15 s; answer: ${answer.split('\r\n')[0]}`);
      }, 15_000);
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => (answer += chunk));
      socket.once('secureConnect', () => {
        socket.write('POST /not-validate HTTP/1.1\r\nhost: x\r\ncontent-length: 1000000\r\n\r\n{');
        drip = setInterval(() => socket.write(' '), 100);
      });
      socket.on('error', () => undefined);
      socket.once('close', () => {
        clearInterval(drip);
        clearTimeout(giveUp);
        resolve(`closed by the server; answer: ${answer.split('\r\n')[0]}`);
      });
    });
    expect(outcome).to.equal('closed by the server; answer: HTTP/1.1 404 Not Found');
    // Requests without a body keep their connection for the next one.
    const get = await call({ method: 'GET' });
    expect(get.status).to.equal(405);
  });

  it('answers 413 above the body limit, whether declared or streamed', async () => {
    const big = Buffer.alloc(64 * 1024 + 1, 0x20);
    const declared = await call({ body: big });
    expect(declared.status).to.equal(413);
    const streamed = await call({ body: big, headers: { 'transfer-encoding': 'chunked' } });
    expect(streamed.status).to.equal(413);
  });

  it('refuses TLS below 1.2', async () => {
    const outcome = await new Promise<string>((resolve) => {
      const socket = connect({
        host: '127.0.0.1',
        port: fx.webhook.webhookPort,
        ca: fx.pki.ca.certPem,
        minVersion: 'TLSv1',
        maxVersion: 'TLSv1.1',
        ciphers: 'DEFAULT@SECLEVEL=0',
      });
      socket.once('secureConnect', () => {
        socket.destroy();
        resolve('connected');
      });
      socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    });
    expect(outcome).to.not.equal('connected');
    const modern = await call({ body: JSON.stringify(sampleReview('tls12', 'CREATE', 'tls12')) });
    expect(modern.status).to.equal(200);
  });

  it('refuses a TLS 1.2 client that offers only a static-RSA CBC suite, and serves one offering ECDHE AEAD', async () => {
    const handshake = (ciphers: string) =>
      new Promise<string>((resolve) => {
        const socket = connect({
          host: '127.0.0.1',
          port: fx.webhook.webhookPort,
          ca: fx.pki.ca.certPem,
          maxVersion: 'TLSv1.2',
          ciphers,
        });
        socket.once('secureConnect', () => {
          const name = socket.getCipher().name;
          socket.destroy();
          resolve(`connected ${name}`);
        });
        socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
      });
    expect(await handshake('AES128-SHA')).to.not.match(/^connected/);
    expect(await handshake('AES256-SHA256')).to.not.match(/^connected/);
    expect(await handshake('ECDHE-RSA-AES128-GCM-SHA256')).to.equal('connected ECDHE-RSA-AES128-GCM-SHA256');
  });

  it('serves only /metrics, /healthz and /readyz on the plain metrics port, with the webhook metrics', async () => {
    const metrics = await getMetricsPort(fx.webhook.metricsPort, '/metrics');
    expect(metrics.status).to.equal(200);
    expect(metricValue(metrics.body, 'skr_webhook_admission_requests_total{code="200"}')).to.be.at.least(2);
    expect(metricValue(metrics.body, 'skr_webhook_admission_errors_total{reason="bad_json"}')).to.be.at.least(
      1,
    );
    expect(metricValue(metrics.body, 'skr_webhook_events_delivered_total')).to.be.at.least(2);
    expect(metrics.body).to.contain('skr_webhook_admission_duration_seconds_bucket');
    expect(metrics.body).to.contain(
      'skr_webhook_callback_duration_seconds_bucket{le="0.1",outcome="delivered"}',
    );
    expect(metrics.body).to.contain('skr_webhook_queue_depth');
    expect((await getMetricsPort(fx.webhook.metricsPort, '/readyz')).status).to.equal(200);
    expect((await getMetricsPort(fx.webhook.metricsPort, '/healthz')).status).to.equal(200);
    expect((await getMetricsPort(fx.webhook.metricsPort, '/validate/lifecycle-manager')).status).to.equal(
      404,
    );
  });

  it('property: random bytes never crash the server and only yield 200, 400 or 413', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 0, maxLength: 70 * 1024 }), async (bytes) => {
        const answer = await call({ body: Buffer.from(bytes) });
        expect([200, 400, 413]).to.include(answer.status);
      }),
      { numRuns: 150 },
    );
    expect((await call({ body: JSON.stringify(sampleReview('alive', 'CREATE', 'alive')) })).status).to.equal(
      200,
    );
  });

  it('property: truncated and mutated reviews only yield 200 or 400, and 200 echoes the uid', async () => {
    const reviews = fc.record({
      uid: fc.string({ minLength: 1, maxLength: 40 }),
      operation: fc.constantFrom('CREATE', 'UPDATE', 'DELETE', 'CONNECT'),
      name: fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/),
      spec: fc.jsonValue({ maxDepth: 3 }),
    });
    await fc.assert(
      fc.asyncProperty(reviews, fc.nat(), fc.boolean(), async (r, cutSeed, cut) => {
        const review = sampleReview(r.uid, r.operation === 'CONNECT' ? 'CREATE' : r.operation, r.name, {
          v: r.spec,
        });
        (review['request'] as Record<string, unknown>)['operation'] = r.operation;
        const text = JSON.stringify(review);
        const body = cut ? text.slice(0, cutSeed % text.length) : text;
        const answer = await call({ body });
        expect([200, 400]).to.include(answer.status);
        if (answer.status === 200) {
          expect(cut).to.equal(false);
          expect(JSON.parse(answer.body)).to.deep.include({
            response: { uid: r.uid, allowed: true, result: { message: ADMISSION_ALLOWED_MESSAGE } },
          });
        }
      }),
      { numRuns: 150 },
    );
  });

  it('property: any JSON value as body yields 200 or 400, never 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(fc.jsonValue({ maxDepth: 4 }), async (value) => {
        const answer = await call({ body: JSON.stringify(value) ?? 'null' });
        expect([200, 400]).to.include(answer.status);
      }),
      { numRuns: 100 },
    );
  });
});
