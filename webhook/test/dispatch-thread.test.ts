// The admission thread's end of the dispatch thread: changes go over through a shared ring, and every one reaches the KCP.
import { expect } from 'chai';
import type { WatchEventV2 } from '@skr-watcher/api';
import { createRegistry, silentLogger } from '@skr-watcher/telemetry';
import { CONFIG_DEFAULTS, dispatchSettings } from '../src/config.js';
import { DispatchThread } from '../src/dispatch/thread.js';
import { CHANGE_SLEEP_AFTER_MS } from '../src/dispatch/protocol.js';
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

describe('dispatch thread changes', function () {
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

  it("takes changes without a message per change: one shared ring, read on the thread's own timer", async () => {
    // One review per turn, as at 1,000 reviews/s over kept-alive connections: each batch of a few used to be a
    // message, whose port mutex the SCHED_IDLE thread could hold while it waited for a core (decision 022).
    const before = thread.messagesPosted;
    for (let i = 0; i < 50; i++) {
      thread.enqueue('lifecycle-manager', event(`sample-${i}`), `uid-${i}`);
      await nextTurn();
    }
    await kcp.waitFor((received) => received.length >= 50, 30_000, '50 callbacks');
    const names = new Set(kcp.received.map((received) => received.event.watched.Name));
    expect(names.size, 'every change reaches the KCP').to.equal(50);
    // The thread polls while changes come; a loaded machine may let it fall asleep once in between (one wake-up).
    expect(thread.messagesPosted - before).to.be.at.most(1);
  });

  it('wakes a thread that went to sleep on an empty ring with one message', async () => {
    await new Promise((resolve) => setTimeout(resolve, CHANGE_SLEEP_AFTER_MS + 1_000));
    const before = thread.messagesPosted;
    thread.enqueue('lifecycle-manager', event('sample-after-sleep'), 'uid-after-sleep');
    thread.enqueue('lifecycle-manager', event('sample-after-sleep-2'), 'uid-after-sleep-2');
    expect(thread.messagesPosted - before, 'one wake-up for both').to.equal(1);
    await kcp.waitFor((received) => received.length >= 2, 30_000, 'both callbacks');
  });

  it('holds what does not fit in the ring and hands every change over', async () => {
    // ~3.5 MB of changes in one turn: more than the 1 MiB ring holds; the rest waits here, then follows.
    const changes = 10_000;
    for (let i = 0; i < changes; i++)
      thread.enqueue('lifecycle-manager', event(`sample-${i % 3}-${'x'.repeat(200)}`), `uid-${i}`);
    await thread.depth();
    expect(thread.stats.enqueued + thread.stats.coalesced, 'every change taken').to.equal(changes);
    expect(thread.stats.dropped.queue_full).to.equal(0);
  });

  it('answers depth only after taking the changes written before', async () => {
    thread.enqueue('lifecycle-manager', event('sample-held'), 'uid-held');
    // The thread reads the ring before it answers, so it has counted the change.
    await thread.depth();
    expect(thread.stats.enqueued).to.equal(1);
    await kcp.waitFor(
      (received) => received.some((r) => r.event.watched.Name === 'sample-held'),
      30_000,
      'the held change',
    );
  });
});
