// What an SRE reads from a webhook before anything went wrong: every log line names the SKR (its runtime-id, the CN of
// its certificate), and every counter whose label values are known is exported at 0 from the start, so a first
// increment shows in rate() and increase() and the dashboard panels are not empty.
import { expect } from 'chai';
import { createLogger } from '@skr-watcher/telemetry';
import { ADMISSION_ERRORS, TLS_RELOAD_RESULTS } from '../src/metrics.js';
import {
  callWebhook,
  getMetricsPort,
  metricValue,
  sampleReview,
  startWebhookFixture,
} from './support/webhook-fixture.js';

describe('webhook observability from the start', function () {
  this.timeout(30_000);

  it("carries the SKR's runtime-id (its certificate's CN) on every log line", async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = createLogger('skr-webhook', 'debug', {
      write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>),
    });
    const fx = await startWebhookFixture({ logger, shutdownDrainMs: 300 });
    try {
      // Lines from the admission path, the dispatch thread (KCP down: failed callbacks) and the shutdown.
      await fx.kcp.stop();
      await callWebhook(fx.webhook.webhookPort, fx.pki.ca.certPem, {
        body: JSON.stringify(sampleReview('obs-1', 'CREATE', 'logged')),
      });
      await new Promise((resolve) => setTimeout(resolve, 500));
    } finally {
      await fx.stop();
    }
    expect(lines.length).to.be.at.least(3);
    const without = lines.filter((line) => line['runtimeId'] !== 'skr-test-runtime');
    expect(without, 'log lines without the runtime-id').to.deep.equal([]);
  });

  it('exports admission errors and certificate reloads at 0 for every known label value before any happened', async () => {
    const fx = await startWebhookFixture();
    try {
      const { body } = await getMetricsPort(fx.webhook.metricsPort, '/metrics');
      for (const reason of ADMISSION_ERRORS)
        expect(metricValue(body, `skr_webhook_admission_errors_total{reason="${reason}"}`), reason).to.equal(
          0,
        );
      for (const result of TLS_RELOAD_RESULTS)
        expect(metricValue(body, `skr_webhook_tls_reloads_total{result="${result}"}`), result).to.equal(0);
    } finally {
      await fx.stop();
    }
  });
});
