// Forwarding callbacks between replicas (decision 012) over real mutual-TLS sockets: the owner receives the
// event as the accepting replica saw it; an SKR certificate from the same CA, a certificate of another CA, no
// certificate, and bad bodies are all refused.
import { request } from 'node:https';
import { expect } from 'chai';
import { SHARDING } from '@skr-watcher/api';
import type { AcceptedEvent } from '../src/listener/index.js';
import { createForwarder, startPeerServer, type Delivery, type PeerServer } from '../src/sharding/index.js';
import { createTestCa, issueTestLeaf, type KeyPairPem } from './support/listener-certs.js';

const EVENT: AcceptedEvent = {
  runtimeId: 'runtime-7',
  kyma: { namespace: 'kcp-system', name: 'kyma-7' },
  component: 'lifecycle-manager',
  contract: 'v2',
  watched: { namespace: 'kyma-system', name: 'sample' },
  gvk: { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Sample' },
  fingerprint: { uid: 'u-1', generation: 3, previousResourceVersion: '41' },
  receivedAt: new Date('2026-11-23T12:00:00.123Z'),
};

describe('callback forwarding between replicas', () => {
  const ca = createTestCa('skr-watcher-ca');
  const agentCert = issueTestLeaf(ca, { commonName: 'skr-agent-listener' });
  const tls = { ...agentCert, caBundlePem: ca.certPem };
  let server: PeerServer;
  const delivered: AcceptedEvent[] = [];
  let answer: Delivery = 'accepted';

  before(async () => {
    server = await startPeerServer({
      host: '127.0.0.1',
      port: 0,
      tls,
      deliver: (event) => {
        delivered.push(event);
        return answer;
      },
    });
  });
  after(async () => server.close());
  beforeEach(() => {
    delivered.length = 0;
    answer = 'accepted';
  });

  /** A raw POST with the given client certificate; the server is not verified (we test the server's side). */
  const post = (client: KeyPairPem | undefined, body: string, path: string = SHARDING.forwardPath) =>
    new Promise<number>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: server.port,
          method: 'POST',
          path,
          rejectUnauthorized: false,
          ...(client ? { cert: client.certPem, key: client.keyPem } : {}),
          headers: { 'content-type': 'application/json' },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      req.end(body);
    });

  it('delivers a forwarded event to the owner exactly as the accepting replica saw it', async () => {
    const forwarder = createForwarder({ tls });
    try {
      await forwarder.forward(`127.0.0.1:${server.port}`, EVENT);
    } finally {
      forwarder.close();
    }
    expect(delivered).to.deep.equal([EVENT]);
  });

  it('rejects the forward when the receiver does not own the Kyma', async () => {
    answer = 'not-owner';
    const forwarder = createForwarder({ tls });
    try {
      const outcome = await forwarder.forward(`127.0.0.1:${server.port}`, EVENT).then(
        () => 'taken',
        (error: Error) => error.message,
      );
      expect(outcome).to.include('409');
    } finally {
      forwarder.close();
    }
  });

  it('refuses an SKR client certificate of the same CA (403) and a certificate of another CA (TLS alert)', async () => {
    const skr = issueTestLeaf(ca, { commonName: 'runtime-7' });
    expect(
      await post(skr, JSON.stringify({ ...EVENT, receivedAt: EVENT.receivedAt.toISOString() })),
    ).to.equal(403);
    const other = createTestCa('other-ca');
    const stranger = issueTestLeaf(other, { commonName: 'skr-agent-listener' });
    const refused = await post(stranger, '{}').then(
      (code) => `answered ${code}`,
      (error: Error) => error.message,
    );
    expect(refused).to.not.match(/^answered/);
    const anonymous = await post(undefined, '{}').then(
      (code) => `answered ${code}`,
      (error: Error) => error.message,
    );
    expect(anonymous).to.not.match(/^answered/);
    expect(delivered).to.deep.equal([]);
  });

  it('answers 400 to bodies that are not a forwarded event, 413 above the limit, 404 elsewhere', async () => {
    expect(await post(agentCert, 'not json')).to.equal(400);
    expect(
      await post(agentCert, JSON.stringify({ ...EVENT, kyma: { namespace: 'x', name: 'A B' } })),
    ).to.equal(400);
    expect(await post(agentCert, JSON.stringify({ ...EVENT, receivedAt: 'yesterday' }))).to.equal(400);
    expect(await post(agentCert, 'x'.repeat(SHARDING.forwardBodyBytes + 1))).to.equal(413);
    expect(await post(agentCert, '{}', '/other')).to.equal(404);
    expect(delivered).to.deep.equal([]);
  });

  it('does not trust a peer server whose certificate names another identity', async () => {
    const skrServer = issueTestLeaf(ca, { commonName: 'runtime-9' });
    const impostor = await startPeerServer({
      host: '127.0.0.1',
      port: 0,
      tls: { ...skrServer, caBundlePem: ca.certPem },
      deliver: () => 'accepted',
    });
    const forwarder = createForwarder({ tls });
    try {
      const outcome = await forwarder.forward(`127.0.0.1:${impostor.port}`, EVENT).then(
        () => 'taken',
        (error: Error) => String((error.cause as Error | undefined)?.message ?? error.message),
      );
      expect(outcome).to.include('is not the agent');
    } finally {
      forwarder.close();
      await impostor.close();
    }
  });
});
