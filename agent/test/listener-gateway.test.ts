// The listener in gateway mode: plain HTTP behind a mesh gateway, identity from X-Forwarded-Client-Cert,
// believed only from trusted proxy addresses. Real sockets; 127.0.0.2 plays the gateway.
import { expect } from 'chai';
import { startListener, type Listener } from '../src/listener/index.js';
import { createTestCa, issueTestLeaf } from './support/listener-certs.js';
import { plainAgent, sendCallback, v1Body, v2Body, type CallbackAgent } from './support/listener-client.js';

const KYMAS: Record<string, { namespace: string; name: string }> = {
  'runtime-a': { namespace: 'kcp-system', name: 'kyma-a' },
  'runtime-b': { namespace: 'kcp-system', name: 'kyma-b' },
};
const GATEWAY = '127.0.0.2';
const xfccFor = (cn: string): string =>
  `By=spiffe://cluster.local/ns/kcp-system/sa/skr-agent;Hash=0f3c;Subject="CN=${cn},O=SKR,C=DE";URI=spiffe://skr/${cn}`;

describe('listener (gateway mode, X-Forwarded-Client-Cert)', function () {
  let listener: Listener;
  let enqueued: string[];
  const agents: CallbackAgent[] = [];
  const fromGateway = (): CallbackAgent => {
    const agent = plainAgent({ localAddress: GATEWAY });
    agents.push(agent);
    return agent;
  };
  const fromElsewhere = (): CallbackAgent => {
    const agent = plainAgent({ localAddress: '127.0.0.1' });
    agents.push(agent);
    return agent;
  };

  beforeEach(async function () {
    enqueued = [];
    listener = await startListener({
      host: '127.0.0.1',
      port: 0,
      mode: { kind: 'gateway', trustedProxies: [GATEWAY, '10.0.0.0/8'] },
      resolveKyma: (runtimeId) => KYMAS[runtimeId],
      enqueue: (key) => void enqueued.push(key),
    });
  });

  afterEach(async function () {
    for (const agent of agents.splice(0)) agent.destroy();
    await listener.close();
  });

  it('accepts the identity a trusted gateway forwards and wakes only that Kyma', async function () {
    const answer = await sendCallback(listener.port, fromGateway(), {
      body: v2Body(),
      headers: { 'x-forwarded-client-cert': xfccFor('runtime-a') },
    });
    expect(answer.status).to.equal(200);
    expect(enqueued).to.deep.equal(['kcp-system/kyma-a']);
  });

  it('refuses the same request from a peer that is not a trusted proxy with 401', async function () {
    const answer = await sendCallback(listener.port, fromElsewhere(), {
      body: v2Body(),
      headers: { 'x-forwarded-client-cert': xfccFor('runtime-a') },
    });
    expect(answer.status).to.equal(401);
    expect(answer.json?.message).to.equal('peer 127.0.0.1 is not a trusted proxy');
    expect(enqueued).to.have.length(0);
  });

  it("takes the gateway's element (the last), not what the client put in front of it", async function () {
    // The client forged an element for B; the gateway appended the verified one for A.
    const header = `${xfccFor('runtime-b')},${xfccFor('runtime-a')}`;
    const answer = await sendCallback(listener.port, fromGateway(), {
      body: v2Body(),
      headers: { 'x-forwarded-client-cert': header },
    });
    expect(answer.status).to.equal(200);
    expect(enqueued).to.deep.equal(['kcp-system/kyma-a']);
  });

  it("reads the CN from a forwarded Cert (Kyma's Istio gateway) and applies the v1 owner check", async function () {
    const ca = createTestCa('gateway-test-ca');
    const leaf = issueTestLeaf(ca, { commonName: 'runtime-b' });
    const header = `Hash=abc;Cert="${encodeURIComponent(leaf.certPem)}";Subject="CN=runtime-b"`;
    const agent = fromGateway();
    const own = await sendCallback(listener.port, agent, {
      path: '/v1/lifecycle-manager/event',
      body: v1Body(KYMAS['runtime-b']!),
      headers: { 'x-forwarded-client-cert': header },
    });
    expect(own.status).to.equal(200);
    const foreign = await sendCallback(listener.port, agent, {
      path: '/v1/lifecycle-manager/event',
      body: v1Body(KYMAS['runtime-a']!),
      headers: { 'x-forwarded-client-cert': header },
    });
    expect(foreign.status).to.equal(403);
    expect(enqueued).to.deep.equal(['kcp-system/kyma-b']);
  });

  it("accepts a gateway element that forwards the whole chain, beyond Node's default 16 KiB of headers", async function () {
    const ca = createTestCa('gateway-test-ca');
    const leaf = issueTestLeaf(ca, { commonName: 'runtime-a' });
    const chain = encodeURIComponent((leaf.certPem + ca.certPem).repeat(8));
    const header = `Hash=abc;Cert="${encodeURIComponent(leaf.certPem)}";Chain="${chain}";Subject="CN=runtime-a"`;
    expect(header.length).to.be.greaterThan(16 * 1024);
    const answer = await sendCallback(listener.port, fromGateway(), {
      body: v2Body(),
      headers: { 'x-forwarded-client-cert': header },
    });
    expect(answer.status).to.equal(200);
    expect(enqueued).to.deep.equal(['kcp-system/kyma-a']);
  });

  it('refuses missing, malformed, CN-less and self-contradicting headers from the gateway with 401', async function () {
    const ca = createTestCa('gateway-test-ca');
    const leafA = issueTestLeaf(ca, { commonName: 'runtime-a' });
    const cases: [string, string | undefined, RegExp][] = [
      ['missing', undefined, /missing/],
      ['unterminated quote', 'Subject="CN=runtime-a', /unterminated/],
      ['no CN', 'Subject="O=SKR,C=DE"', /exactly one CN, found 0/],
      ['two CNs', 'Subject="CN=runtime-a+CN=runtime-b"', /exactly one CN, found 2/],
      ['no subject or cert', 'By=spiffe://x;URI=spiffe://y', /neither Cert nor Subject/],
      [
        'cert and subject disagree',
        `Cert="${encodeURIComponent(leafA.certPem)}";Subject="CN=runtime-b"`,
        /differ/,
      ],
      ['garbage cert', 'Cert="%ZZnot-a-cert"', /Cert is not/],
    ];
    const agent = fromGateway();
    for (const [label, header, reason] of cases) {
      const answer = await sendCallback(listener.port, agent, {
        body: v2Body(),
        headers: header === undefined ? {} : { 'x-forwarded-client-cert': header },
      });
      expect(answer.status, label).to.equal(401);
      expect(answer.json?.message, label).to.match(reason);
    }
    expect(enqueued).to.have.length(0);
  });

  it('still answers 403 for a forwarded identity without a Kyma', async function () {
    const answer = await sendCallback(listener.port, fromGateway(), {
      body: v2Body(),
      headers: { 'x-forwarded-client-cert': xfccFor('runtime-unknown') },
    });
    expect(answer.status).to.equal(403);
  });

  it('has no TLS to update and says so', function () {
    expect(() => listener.updateTls({ certPem: '', keyPem: '', caBundlePem: '' })).to.throw(/gateway mode/);
  });

  it('refuses to start without trusted proxies or with a malformed one', async function () {
    const base = { port: 0, resolveKyma: () => undefined, enqueue: () => undefined };
    for (const trusted of [[], ['not-an-ip'], ['10.0.0.0/33'], ['10.0.0.1/8/1']]) {
      let error: unknown;
      try {
        const started = await startListener({ ...base, mode: { kind: 'gateway', trustedProxies: trusted } });
        await started.close();
      } catch (caught) {
        error = caught;
      }
      expect(error, JSON.stringify(trusted)).to.be.instanceOf(Error);
    }
  });
});
