// The memory bound on large reviews: bodies being read share a byte budget; a review beyond it is answered 503
// at once (failurePolicy Ignore lets the write through), and the budget comes back when reviews finish.
import { connect, type TLSSocket } from 'node:tls';
import { expect } from 'chai';
import {
  callWebhook,
  getMetricsPort,
  metricValue,
  sampleReview,
  startWebhookFixture,
  type WebhookFixture,
} from './support/webhook-fixture.js';

const MAX_BODY = 1024 * 1024;

/** A review of about 900 KB: well under the body limit, and two of them fit the 2 MiB budget, three do not. */
function largeReview(uid: string): Buffer {
  const padding = 'x'.repeat(900 * 1024);
  return Buffer.from(JSON.stringify(sampleReview(uid, 'CREATE', uid, { replicas: 1, padding })));
}

interface HeldReview {
  socket: TLSSocket;
  body: Buffer;
  /** The status line of the answer, once it came. */
  answer: Promise<string>;
}

/** Sends the headers and the first half of the body, and holds the rest back. */
async function startReview(port: number, ca: string, uid: string): Promise<HeldReview> {
  const socket = connect({ host: '127.0.0.1', port, ca });
  await new Promise((resolve, reject) => socket.once('secureConnect', resolve).once('error', reject));
  const body = largeReview(uid);
  socket.write(
    `POST /validate/lifecycle-manager HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n` +
      `content-length: ${body.length}\r\n\r\n`,
  );
  socket.write(body.subarray(0, body.length >> 1));
  let received = '';
  const answer = new Promise<string>((resolve) => {
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      received += chunk;
      if (received.includes('\r\n')) resolve(received.split('\r\n')[0] as string);
    });
    socket.on('error', () => resolve(`error; received: ${received}`));
    socket.on('close', () => resolve(`closed; received: ${received}`));
  });
  return { socket, body, answer };
}

describe('body budget of reviews in flight', function () {
  this.timeout(60_000);
  let fx: WebhookFixture;

  before(async () => {
    fx = await startWebhookFixture({ maxBodyBytes: MAX_BODY, maxBodyBytesInFlight: 2 * MAX_BODY });
  });
  after(async () => {
    await fx?.stop();
  });

  it('answers 503 at once to a large review beyond the budget while two are read, and serves the two', async () => {
    const held = [
      await startReview(fx.webhook.webhookPort, fx.pki.ca.certPem, 'big-1'),
      await startReview(fx.webhook.webhookPort, fx.pki.ca.certPem, 'big-2'),
      await startReview(fx.webhook.webhookPort, fx.pki.ca.certPem, 'big-3'),
    ];
    // While every body is incomplete, one of the three (whichever the server read last) is refused.
    const first = await Promise.race([
      ...held.map((review, index) => review.answer.then((line) => ({ index, line }))),
      new Promise<{ index: number; line: string }>((resolve) =>
        setTimeout(() => resolve({ index: -1, line: 'no answer while the bodies were incomplete' }), 15_000),
      ),
    ]);
    expect(first.line).to.equal('HTTP/1.1 503 Service Unavailable');
    const others = held.filter((_, index) => index !== first.index);
    for (const review of others) review.socket.write(review.body.subarray(review.body.length >> 1));
    for (const review of others) expect(await review.answer).to.equal('HTTP/1.1 200 OK');
    for (const review of held) review.socket.destroy();

    // The budget came back: the next large review is served.
    const after = await callWebhook(fx.webhook.webhookPort, fx.pki.ca.certPem, {
      body: largeReview('big-4'),
    });
    expect(after.status).to.equal(200);
    const metrics = await getMetricsPort(fx.webhook.metricsPort, '/metrics');
    expect(metricValue(metrics.body, 'skr_webhook_admission_errors_total{reason="over_budget"}')).to.equal(1);
    expect(metricValue(metrics.body, 'skr_webhook_admission_requests_total{code="503"}')).to.equal(1);
  });

  it('refuses a start-up whose budget could never hold one review of the maximum size', async () => {
    const { webhookCommand } = await import('../src/config.js');
    const errors: string[] = [];
    const command = webhookCommand(() => Promise.resolve())
      .exitOverride()
      .configureOutput({ writeErr: (text) => errors.push(text), writeOut: () => undefined });
    await command
      .parseAsync(
        [
          ...['--tls-cert', 'c', '--tls-key', 'k', '--ca-cert', 'a', '--kcp-addr', 'kcp:443'],
          ...['--max-body-bytes', '2048', '--max-body-bytes-in-flight', '1024'],
        ],
        { from: 'user' },
      )
      .catch(() => undefined);
    expect(errors.join('')).to.contain(
      '--max-body-bytes-in-flight (1024) must not be below --max-body-bytes',
    );
  });
});
