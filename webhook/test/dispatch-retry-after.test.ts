// The dispatcher and its real KCP client against a real mTLS server that answers 503 with Retry-After, as the
// agent's listener does while a Kyma's owner cannot take a callback (replica loss): the next attempt goes
// when Retry-After says, however many attempts came before, and a Retry-After past the backoff's maximum is bounded
// by it. Time is the dispatcher's injected clock; the sockets are real.
import type { Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import type { WatchEventV2 } from '@skr-watcher/api';
import { silentLogger } from '@skr-watcher/telemetry';
import { Dispatcher, type DeliveryOutcome } from '../src/dispatch/index.js';
import { KcpClient } from '../src/kcp-client.js';
import { ManualClock, settle } from '../../test/support/manual-clock.js';
import { waitUntil } from '../../test/support/eventually.js';
import { testPki } from './support/certs.js';
import { startMtlsServer } from './support/mtls-server.js';

const EVENT: WatchEventV2 = {
  watched: { Namespace: 'kyma-system', Name: 'sample' },
  watchedGvk: { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Sample' },
};

describe('Dispatcher honours a listener’s Retry-After (real mTLS server)', function () {
  this.timeout(60_000);
  const pki = testPki();
  const leaf = pki.leaf('skr-retry-after');
  let server: Server;
  /** Requests the server got; each is answered by `answer(n)` (n from 1). */
  let requests = 0;
  let answer: (n: number) => { status: number; retryAfter?: string } = () => ({ status: 202 });
  const kcpClients: KcpClient[] = [];

  before(async () => {
    const serving = pki.listener();
    server = await startMtlsServer(serving, pki.ca.certPem, (_req, res) => {
      const { status, retryAfter } = answer(++requests);
      res
        .writeHead(status, {
          'content-type': 'application/json',
          ...(retryAfter === undefined ? {} : { 'retry-after': retryAfter }),
        })
        .end(JSON.stringify({ code: status }));
    });
  });
  beforeEach(() => (requests = 0));
  after(async () => {
    for (const client of kcpClients) client.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  /** A dispatcher sending through a real KcpClient; `outcomes` grows as each attempt's answer is in. */
  const dispatcherFor = (backoff: { initialMs: number; maxMs: number }) => {
    const clock = new ManualClock();
    const kcp = new KcpClient({
      address: { host: '127.0.0.1', port: (server.address() as AddressInfo).port },
      material: { cert: leaf.certPem, key: leaf.keyPem, ca: pki.ca.certPem },
      maxSockets: 1,
      timeoutMs: 10_000,
    });
    kcpClients.push(kcp);
    const outcomes: DeliveryOutcome['result'][] = [];
    const dispatcher = new Dispatcher({
      send: kcp.send,
      workers: 1,
      maxQueue: 10,
      backoffInitialMs: backoff.initialMs,
      backoffMaxMs: backoff.maxMs,
      maxAgeMs: 600_000,
      logger: silentLogger(),
      clock,
      random: () => 0.5,
      observer: {
        enqueued: () => {},
        coalesced: () => {},
        delivered: () => {},
        dropped: () => {},
        depth: () => {},
        attempt: (outcome) => outcomes.push(outcome),
      },
    });
    /** Waits (real time) until attempt `n` was answered and its retry scheduled. */
    const answered = async (n: number) => {
      await waitUntil(`attempt ${n} answered`, () => outcomes.length >= n, 20_000, 20);
      await settle();
    };
    return { clock, dispatcher, outcomes, answered };
  };

  it('sends again after Retry-After, not after an exponential backoff grown past it', async () => {
    // The first six answers: 503, send again in 1 s (a replica that cannot reach the Kyma's owner yet).
    answer = (n) => (n <= 6 ? { status: 503, retryAfter: '1' } : { status: 202 });
    const { clock, dispatcher, outcomes, answered } = dispatcherFor({ initialMs: 250, maxMs: 30_000 });
    dispatcher.enqueue('lifecycle-manager', EVENT);
    for (let n = 1; n <= 6; n++) {
      await answered(n);
      expect(outcomes[n - 1]).to.equal('retry');
      // 1 s on the dispatcher's clock: the next attempt is due. The backoff alone would be 1.5 s by the fourth
      // attempt and 12 s by the sixth (250 ms doubling, half jitter at 0.5).
      await clock.advance(1_000);
      await waitUntil(`attempt ${n + 1} sent 1 s after answer ${n}`, () => requests >= n + 1, 20_000, 20);
    }
    await answered(7);
    expect(outcomes).to.deep.equal([...Array<string>(6).fill('retry'), 'delivered']);
    expect(dispatcher.depth).to.equal(0);
    expect(dispatcher.breakerState, 'a 503 with Retry-After is the listener asking, not KCP down').to.equal(
      'closed',
    );
    await dispatcher.drain(1_000);
  });

  it('bounds a Retry-After past the backoff maximum by that maximum', async () => {
    answer = (n) => (n === 1 ? { status: 503, retryAfter: '120' } : { status: 202 });
    const { clock, dispatcher, outcomes, answered } = dispatcherFor({ initialMs: 250, maxMs: 5_000 });
    dispatcher.enqueue('lifecycle-manager', EVENT);
    await answered(1);
    await clock.advance(5_000);
    await waitUntil(
      'attempt 2 sent at the backoff maximum (5 s), not after 120 s',
      () => requests >= 2,
      20_000,
      20,
    );
    await answered(2);
    expect(outcomes).to.deep.equal(['retry', 'delivered']);
    await dispatcher.drain(1_000);
  });
});
