// A callback is answered 2xx only once the Kyma's owner has it: when the hand-over to the owning
// replica fails, the listener answers 503 with Retry-After over real mTLS, so the webhook sends the event again.
import { expect } from 'chai';
import { NotTakenYetError, startListener, type Listener } from '../src/listener/index.js';
import { createTestCa, issueListenerServingCert, issueTestLeaf } from './support/listener-certs.js';
import { sendCallback, tlsAgent, v2Body, type CallbackAgent } from './support/listener-client.js';

describe('listener: answered only once the owner has the event', function () {
  this.timeout(30_000);
  const ca = createTestCa('kcp-ca');
  const serving = issueListenerServingCert(ca);
  const skr = { ...issueTestLeaf(ca, { commonName: 'runtime-a' }), caPem: ca.certPem };
  let listener: Listener;
  let agent: CallbackAgent;
  let handOver: () => Promise<void>;

  beforeEach(async () => {
    listener = await startListener({
      host: '127.0.0.1',
      port: 0,
      mode: { kind: 'direct', ...serving, caBundlePem: ca.certPem },
      resolveKyma: (runtimeId) =>
        runtimeId === 'runtime-a' ? { namespace: 'kcp-system', name: 'kyma-a' } : undefined,
      enqueue: () => handOver(),
    });
    agent = tlsAgent(skr);
  });
  afterEach(async () => {
    agent.destroy();
    await listener.close();
  });

  it('answers 503 with Retry-After when the owner did not take the event', async () => {
    handOver = () => Promise.reject(new Error('peer 10.0.0.7:8083 answered 503 (failed)'));
    const answer = await sendCallback(listener.port, agent, { body: v2Body() });
    expect(answer.status).to.equal(503);
    expect(answer.headers['retry-after']).to.equal('1');
    expect(answer.json?.message).to.contain('did not reach the replica that owns the Kyma');
  });

  it('says in Retry-After when the owner is worth trying again, when the hand-over knows (whole seconds, at least 1)', async () => {
    handOver = () =>
      Promise.reject(new NotTakenYetError('owner unreachable; its Lease runs 8.2 s more', 8.7));
    const later = await sendCallback(listener.port, agent, { body: v2Body() });
    expect(later.status).to.equal(503);
    expect(later.headers['retry-after']).to.equal('9');
    expect(later.json?.message).to.contain('its Lease runs 8.2 s more');
    handOver = () => Promise.reject(new NotTakenYetError('its Lease ran out just now', 0));
    const now = await sendCallback(listener.port, agent, { body: v2Body() });
    expect(now.headers['retry-after']).to.equal('1');
  });

  it('answers 200 only after the owner took it', async () => {
    let taken = false;
    handOver = () =>
      new Promise((resolve) =>
        setTimeout(() => {
          taken = true;
          resolve();
        }, 300),
      );
    const answer = await sendCallback(listener.port, agent, { body: v2Body() });
    expect(answer.status).to.equal(200);
    expect(taken, 'the owner had the event before the answer').to.equal(true);
  });
});
