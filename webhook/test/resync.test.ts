// The "look at everything" callback: a webhook that starts, or that dropped events, asks KCP to
// reconcile its SKR in full, over real mTLS, in a body upstream's listener takes as any other v2 event.
import { expect } from 'chai';
import { RESYNC_EVENT, parseWatchEvent } from '@skr-watcher/api';
import { callWebhook, sampleReview, startWebhookFixture } from './support/webhook-fixture.js';

describe('webhook: resync callbacks', function () {
  this.timeout(60_000);

  it('a webhook that starts asks KCP once to look at everything, in an upstream-shaped v2 body', async () => {
    const fx = await startWebhookFixture({ resyncManager: 'lifecycle-manager' });
    try {
      await waitUntil(() => fx.kcp.resyncs.length >= 1, 10_000, 'the start-up resync');
      const [resync] = fx.kcp.resyncs;
      expect(resync?.path).to.equal('/v2/lifecycle-manager/event');
      expect(resync?.clientCn).to.equal('skr-test-runtime');
      expect(resync?.event).to.deep.equal(RESYNC_EVENT);
      // Upstream's listener reads watched and watchedGvk; no fingerprint, so ours cannot narrow it down.
      expect(parseWatchEvent('v2', JSON.parse(JSON.stringify(RESYNC_EVENT))).ok).to.equal(true);
      expect(Object.keys(RESYNC_EVENT).sort()).to.deep.equal(['watched', 'watchedGvk']);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(fx.kcp.resyncs, 'once, not per review').to.have.length(1);
      expect(fx.webhook.dispatchStats.delivered, 'not counted as a change').to.equal(0);
    } finally {
      await fx.stop();
    }
  });

  it('after dropping events (queue full while KCP was down) it sends a resync once KCP is back', async () => {
    const fx = await startWebhookFixture({ queueSize: 1, backoffMaxMs: 300 });
    const port = fx.kcp.port;
    try {
      await waitUntil(() => fx.kcp.resyncs.length >= 1, 10_000, 'the start-up resync');
      await fx.kcp.stop();
      for (const name of ['kept', 'dropped-1', 'dropped-2']) {
        const answer = await callWebhook(fx.webhook.webhookPort, fx.pki.ca.certPem, {
          body: JSON.stringify(sampleReview(`uid-${name}`, 'CREATE', name)),
        });
        expect(answer.status).to.equal(200);
      }
      await fx.webhook.queueDepth();
      expect(fx.webhook.dispatchStats.dropped.queue_full).to.equal(2);
      await fx.kcp.start(port);
      await waitUntil(() => fx.kcp.resyncs.length >= 2, 20_000, 'the resync after the drops');
      await fx.kcp.waitFor(
        (received) => received.some((r) => r.event.watched.Name === 'kept'),
        20_000,
        'kept',
      );
      expect(fx.kcp.received.map((r) => r.event.watched.Name)).to.deep.equal(['kept']);
    } finally {
      await fx.stop();
    }
  });
});

async function waitUntil(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
