// Graceful shutdown: stop accepting reviews, deliver what is queued within the drain time, then stop.
import { expect } from 'chai';
import { createLogger } from '@skr-watcher/telemetry';
import { callWebhook, getMetricsPort, sampleReview, startWebhookFixture } from './support/webhook-fixture.js';

describe('graceful shutdown', function () {
  this.timeout(30_000);

  it('delivers events queued while KCP was down if KCP returns within the drain time', async () => {
    const fx = await startWebhookFixture({ shutdownDrainMs: 5_000 });
    const port = fx.kcp.port;
    try {
      await fx.kcp.stop();
      const answer = await callWebhook(fx.webhook.webhookPort, fx.pki.ca.certPem, {
        body: JSON.stringify(sampleReview('sd-1', 'CREATE', 'queued-at-shutdown')),
      });
      expect(answer.status).to.equal(200);
      expect(await fx.webhook.queueDepth()).to.equal(1);

      const closing = fx.webhook.close();
      // Not ready any more, and no new reviews accepted.
      await new Promise((resolve) => setTimeout(resolve, 100));
      const refused = await callWebhook(fx.webhook.webhookPort, fx.pki.ca.certPem, { body: '{}' }).then(
        () => 'answered',
        (error: NodeJS.ErrnoException) => error.code,
      );
      expect(refused).to.equal('ECONNREFUSED');

      await fx.kcp.start(port);
      await closing;
      expect(fx.kcp.received.map((r) => r.event.watched.Name)).to.deep.equal(['queued-at-shutdown']);
      expect(fx.webhook.dispatchStats.dropped.shutdown).to.equal(0);
    } finally {
      await fx.stop();
    }
  });

  it('gives up after the drain time and counts what is left as dropped (shutdown)', async () => {
    const fx = await startWebhookFixture({ shutdownDrainMs: 500 });
    try {
      await fx.kcp.stop();
      await callWebhook(fx.webhook.webhookPort, fx.pki.ca.certPem, {
        body: JSON.stringify(sampleReview('sd-2', 'CREATE', 'lost-at-shutdown')),
      });
      const started = Date.now();
      await fx.webhook.close();
      expect(Date.now() - started).to.be.below(5_000);
      expect(fx.webhook.dispatchStats.dropped.shutdown).to.equal(1);
      const metrics = await getMetricsPort(fx.webhook.metricsPort, '/metrics').catch(
        (error: NodeJS.ErrnoException) => error.code,
      );
      expect(metrics, 'the metrics port is closed too').to.equal('ECONNREFUSED');
    } finally {
      await fx.stop();
    }
  });

  it("logs the dispatch thread's shutdown drops through the webhook's logger, a few lines that count them all", async () => {
    const lines: { msg: string; suppressed?: number; component?: string }[] = [];
    const logger = createLogger('skr-webhook', 'info', {
      write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[number]),
    });
    const fx = await startWebhookFixture({ shutdownDrainMs: 300, logger });
    try {
      await fx.kcp.stop();
      for (let i = 0; i < 20; i++) {
        await callWebhook(fx.webhook.webhookPort, fx.pki.ca.certPem, {
          body: JSON.stringify(sampleReview(`sd-many-${i}`, 'CREATE', `lost-${i}`)),
        });
      }
      expect(await fx.webhook.queueDepth()).to.equal(20);
      await fx.webhook.close();
      expect(fx.webhook.dispatchStats.dropped.shutdown).to.equal(20);
      const drops = lines.filter((line) => line.msg.startsWith('event dropped: shutdown'));
      expect(drops.length).to.be.within(1, 3);
      const accounted = drops.reduce(
        (sum, line) => sum + (line.msg === 'event dropped: shutdown' ? 1 : 0) + (line.suppressed ?? 0),
        0,
      );
      expect(accounted).to.equal(20);
      expect(drops.every((line) => line.component === 'skr-webhook')).to.equal(true);
    } finally {
      await fx.stop();
    }
  });
});
