// The admission thread's end of the dispatch thread: changes go over in batches, and every one reaches the KCP.
import { expect } from 'chai';
import type { WatchEventV2 } from '@skr-watcher/api';
import { createRegistry, silentLogger } from '@skr-watcher/telemetry';
import { CONFIG_DEFAULTS, dispatchSettings } from '../src/config.js';
import { BATCH_MAX_CHANGES, DispatchThread } from '../src/dispatch-thread.js';
import { parseKcpAddress } from '../src/kcp-client.js';
import { createWebhookMetrics } from '../src/metrics.js';
import { testPki } from './support/certs.js';
import { TestKcpListener } from './support/kcp-listener.js';

function event(name: string): WatchEventV2 {
  return {
    watched: { Namespace: 'kyma-system', Name: name },
    watchedGvk: { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Sample' },
  };
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('dispatch thread batches', function () {
  this.timeout(60_000);
  let kcp: TestKcpListener;
  let thread: DispatchThread;

  beforeEach(async () => {
    const pki = testPki();
    const leaf = pki.leaf('skr-batch-test');
    kcp = new TestKcpListener(pki.listener(), pki.ca.certPem);
    await kcp.start();
    thread = await DispatchThread.start({
      address: parseKcpAddress(kcp.addr),
      material: { cert: leaf.certPem, key: leaf.keyPem, ca: pki.ca.certPem },
      ...dispatchSettings(CONFIG_DEFAULTS),
      logger: silentLogger(),
      observer: createWebhookMetrics(createRegistry()).dispatch,
    });
  });

  afterEach(async () => {
    await thread.drain(2_000);
    await kcp.stop();
  });

  it('posts changes answered in separate turns of the loop together, not one message per review', async () => {
    // One review per turn, as at 1,000 reviews/s over kept-alive connections: each used to be a message of its own.
    for (let i = 0; i < 50; i++) {
      thread.enqueue('lifecycle-manager', event(`sample-${i}`), `uid-${i}`);
      await nextTurn();
    }
    await kcp.waitFor((received) => received.length >= 50, 30_000, '50 callbacks');
    const names = new Set(kcp.received.map((received) => received.event.watched.Name));
    expect(names.size, 'every change reaches the KCP').to.equal(50);
    // 50 turns take a few milliseconds; a stalled machine may split them into a few more batches, never 50.
    expect(thread.batchesPosted).to.be.above(0).and.below(25);
  });

  it('posts a full batch at once, without waiting for the hold', async () => {
    for (let i = 0; i < BATCH_MAX_CHANGES; i++)
      thread.enqueue('lifecycle-manager', event(`sample-${i}`), `uid-${i}`);
    expect(thread.batchesPosted).to.equal(1);
    await kcp.waitFor((received) => received.length >= BATCH_MAX_CHANGES, 30_000, 'every callback');
  });

  it('answers depth only after the changes held in the batch', async () => {
    thread.enqueue('lifecycle-manager', event('sample-held'), 'uid-held');
    // depth() sends the held batch first, so the thread has counted the change when it answers.
    await thread.depth();
    expect(thread.stats.enqueued).to.equal(1);
    await kcp.waitFor(
      (received) => received.some((r) => r.event.watched.Name === 'sample-held'),
      30_000,
      'the held change',
    );
  });
});
