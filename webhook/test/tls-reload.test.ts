// Certificate files swapped the way the kubelet swaps Secret volumes, while traffic flows.
import { expect } from 'chai';
import {
  callWebhook,
  getMetricsPort,
  metricValue,
  sampleReview,
  startWebhookFixture,
  type WebhookFixture,
} from './support/webhook-fixture.js';
import { secretFiles } from './support/certs.js';

async function eventually(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('certificate hot reload', function () {
  this.timeout(60_000);
  let fx: WebhookFixture;

  beforeEach(async () => {
    // A long poll: the directory watch must do the work.
    fx = await startWebhookFixture({ certPollMs: 600_000 });
  });
  afterEach(async () => {
    await fx?.stop();
  });

  it('serves and calls back with the new certificate after a symlink swap, failing nothing in between', async () => {
    const ca = fx.pki.ca.certPem;
    const port = fx.webhook.webhookPort;
    const first = await callWebhook(port, ca, {
      body: JSON.stringify(sampleReview('u0', 'CREATE', 'before')),
    });
    expect(first.status).to.equal(200);

    let stop = false;
    const statuses: number[] = [];
    let sent = 0;
    const traffic = (async () => {
      while (!stop) {
        const name = `traffic-${sent++}`;
        // New connections each time (agent: false), so handshakes happen across the swap.
        const answer = await callWebhook(port, ca, {
          body: JSON.stringify(sampleReview(`u-${name}`, 'CREATE', name)),
        });
        statuses.push(answer.status);
      }
    })();

    await new Promise((resolve) => setTimeout(resolve, 200));
    const rotated = fx.pki.leaf('skr-rotated-runtime');
    await fx.volume.update(secretFiles(rotated, ca));
    await eventually(
      async () =>
        (await callWebhook(port, ca, { body: JSON.stringify(sampleReview('probe', 'DELETE', 'probe')) }))
          .serverSerial !== first.serverSerial,
      5_000,
      'the server to present the new certificate',
    );
    await fx.kcp.waitFor(
      (r) => r.some((e) => e.clientCn === 'skr-rotated-runtime'),
      5_000,
      'a callback with the new client certificate',
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    stop = true;
    await traffic;

    expect(statuses.length).to.be.greaterThan(5);
    expect(
      statuses.every((s) => s === 200),
      `statuses: ${statuses.join(',')}`,
    ).to.equal(true);
    await fx.kcp.waitFor(
      (r) =>
        Array.from({ length: sent }, (_, i) => `traffic-${i}`).every((name) =>
          r.some((e) => e.event.watched.Name === name),
        ),
      10_000,
      'every event of the traffic',
    );
    const metrics = (await getMetricsPort(fx.webhook.metricsPort, '/metrics')).body;
    expect(
      metricValue(metrics, 'skr_webhook_callback_duration_seconds_count{outcome="retry"}') ?? 0,
    ).to.equal(0);
    expect(metricValue(metrics, 'skr_webhook_tls_reloads_total{result="applied"}')).to.equal(1);
    expect(fx.kcp.invalid).to.deep.equal([]);
  });

  it('keeps the current certificates while the files on disk do not match, and takes them once they do', async () => {
    const ca = fx.pki.ca.certPem;
    const port = fx.webhook.webhookPort;
    const original = await callWebhook(port, ca, { body: JSON.stringify(sampleReview('u1', 'CREATE', 'a')) });
    const next = fx.pki.leaf('skr-next');
    // Key of one leaf with the certificate of another: what a half-written update looks like.
    await fx.volume.update({ 'tls.crt': next.certPem, 'tls.key': fx.leaf.keyPem, 'ca.crt': ca });
    expect(await fx.webhook.reloadCertificates()).to.equal(false);
    const during = await callWebhook(port, ca, { body: JSON.stringify(sampleReview('u2', 'CREATE', 'b')) });
    expect(during.status).to.equal(200);
    expect(during.serverSerial).to.equal(original.serverSerial);
    const metrics = (await getMetricsPort(fx.webhook.metricsPort, '/metrics')).body;
    expect(metricValue(metrics, 'skr_webhook_tls_reloads_total{result="failed"}')).to.be.at.least(1);

    await fx.volume.update(secretFiles(next, ca));
    await eventually(
      async () =>
        (await callWebhook(port, ca, { body: JSON.stringify(sampleReview('u3', 'CREATE', 'c')) }))
          .serverSerial !== original.serverSerial,
      5_000,
      'the server to present the matching new certificate',
    );
  });
});
