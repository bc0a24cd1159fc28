// The callback listener in direct mode over real TLS sockets: identity, status codes, limits, rotation.
import { expect } from 'chai';
import { connect } from 'node:tls';
import { createCa, issueLeaf } from '@skr-watcher/pki';
import { Registry } from '@skr-watcher/telemetry';
import { startListener, type AcceptedEvent, type Listener } from '../src/listener/index.js';
import { ManualClock } from '../../test/support/manual-clock.js';
import {
  createTestCa,
  createTestKey,
  issueListenerServingCert,
  issueTestLeaf,
  type TestCa,
} from './support/listener-certs.js';
import {
  sendCallback,
  tlsAgent,
  v1Body,
  v2Body,
  type CallbackAgent,
  type ClientIdentity,
} from './support/listener-client.js';

const KYMAS: Record<string, { namespace: string; name: string }> = {
  'runtime-a': { namespace: 'kcp-system', name: 'kyma-a' },
  'runtime-b': { namespace: 'kcp-system', name: 'kyma-b' },
};

describe('listener (direct mTLS)', function () {
  let kcpCa: TestCa;
  let foreignCa: TestCa;
  let serving: { certPem: string; keyPem: string };
  let skrA: ClientIdentity;
  let skrB: ClientIdentity;
  let listener: Listener;
  let registry: Registry;
  let enqueued: string[];
  let accepted: AcceptedEvent[];
  const agents: CallbackAgent[] = [];

  function agentFor(identity: ClientIdentity): CallbackAgent {
    const agent = tlsAgent(identity);
    agents.push(agent);
    return agent;
  }

  before(function () {
    kcpCa = createTestCa('kcp-ca');
    foreignCa = createTestCa('foreign-ca');
    serving = issueListenerServingCert(kcpCa);
    skrA = {
      ...issueTestLeaf(kcpCa, { commonName: 'runtime-a', dnsNames: ['skr-a.example.com'] }),
      caPem: kcpCa.certPem,
    };
    skrB = {
      ...issueTestLeaf(kcpCa, { commonName: 'runtime-b', dnsNames: ['skr-b.example.com'] }),
      caPem: kcpCa.certPem,
    };
  });

  beforeEach(async function () {
    enqueued = [];
    accepted = [];
    registry = new Registry();
    listener = await startListener({
      host: '127.0.0.1',
      port: 0,
      mode: { kind: 'direct', ...serving, caBundlePem: kcpCa.certPem },
      resolveKyma: (runtimeId) => KYMAS[runtimeId],
      enqueue: (key) => void enqueued.push(key),
      onAccepted: (event) => accepted.push(event),
      registry,
    });
  });

  afterEach(async function () {
    for (const agent of agents.splice(0)) agent.destroy();
    await listener.close();
  });

  it("wakes only SKR A's Kyma for A's certificate and reports the event", async function () {
    const answer = await sendCallback(listener.port, agentFor(skrA), {
      body: v2Body('my-sample', 'default'),
    });
    expect(answer.status).to.equal(200);
    expect(answer.json).to.include({ code: 200, reason: 'Accepted' });
    expect(enqueued).to.deep.equal(['kcp-system/kyma-a']);
    expect(accepted).to.have.length(1);
    const [event] = accepted;
    expect(event).to.deep.include({
      runtimeId: 'runtime-a',
      kyma: { namespace: 'kcp-system', name: 'kyma-a' },
      component: 'lifecycle-manager',
      contract: 'v2',
      watched: { namespace: 'default', name: 'my-sample' },
      gvk: { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Sample' },
    });
    expect(event?.receivedAt).to.be.instanceOf(Date);
  });

  it("wakes B for B's certificate, and A and B separately over kept-alive connections", async function () {
    const a = agentFor(skrA);
    const b = agentFor(skrB);
    for (let i = 0; i < 5; i++) {
      expect((await sendCallback(listener.port, a, { body: v2Body(`a-${i}`) })).status).to.equal(200);
      expect((await sendCallback(listener.port, b, { body: v2Body(`b-${i}`) })).status).to.equal(200);
    }
    expect(enqueued.filter((key) => key === 'kcp-system/kyma-a')).to.have.length(5);
    expect(enqueued.filter((key) => key === 'kcp-system/kyma-b')).to.have.length(5);
    expect(enqueued).to.have.length(10);
  });

  it('accepts the SKR leaf that packages/pki issues under a packages/pki CA', async function () {
    const ca = createCa({ commonName: 'kcp-pki-ca', keyBits: 2048 });
    const leaf = issueLeaf({
      ca,
      runtimeId: 'runtime-b',
      dnsNames: ['skr-b.example.com'],
      ipAddresses: ['127.0.0.1'],
    });
    // The same pki leaf type serves the listener too: serverAuth and clientAuth on every leaf.
    const pkiServing = issueLeaf({
      ca,
      runtimeId: 'kcp-listener',
      dnsNames: ['localhost'],
      ipAddresses: ['127.0.0.1'],
    });
    listener.updateTls({ ...pkiServing, caBundlePem: kcpCa.certPem + ca.certPem });
    const answer = await sendCallback(listener.port, agentFor({ ...leaf, caPem: ca.certPem }), {
      body: v2Body(),
    });
    expect(answer.status).to.equal(200);
    expect(enqueued).to.deep.equal(['kcp-system/kyma-b']);
  });

  it('refuses a certificate from a foreign CA with 401 and a reason, waking nothing', async function () {
    const impostor = { ...issueTestLeaf(foreignCa, { commonName: 'runtime-a' }), caPem: kcpCa.certPem };
    const answer = await sendCallback(listener.port, agentFor(impostor), { body: v2Body() });
    expect(answer.status).to.equal(401);
    expect(answer.json?.reason).to.equal('Unauthorized');
    expect(answer.json?.message).to.equal(
      'client certificate is not trusted: it was issued by CN=foreign-ca, ' +
        'and the listener accepts certificates issued by CN=kcp-ca',
    );
    expect(answer.headers.connection).to.equal('close');
    expect(enqueued).to.have.length(0);
  });

  it('refuses a connection without a client certificate with 401 naming the CAs it would accept', async function () {
    const answer = await sendCallback(listener.port, agentFor({ caPem: kcpCa.certPem }), { body: v2Body() });
    expect(answer.status).to.equal(401);
    expect(answer.json?.message).to.equal(
      'no client certificate: the listener accepts certificates issued by CN=kcp-ca, and the client sent none ' +
        '(a client holding none from these CAs sends none)',
    );
    // During a rotation the bundle holds two CAs, and the reason names both.
    const nextCa = createTestCa('kcp-ca-next');
    listener.updateTls({ ...serving, caBundlePem: kcpCa.certPem + nextCa.certPem });
    const during = await sendCallback(listener.port, agentFor({ caPem: kcpCa.certPem }), { body: v2Body() });
    expect(during.status).to.equal(401);
    expect(during.json?.message).to.match(/issued by CN=kcp-ca or CN=kcp-ca-next, and the client sent none/);
    expect(enqueued).to.have.length(0);
  });

  it("refuses the KCP listener's own certificate as a client with 401, even were a Kyma labelled with its CN", async function () {
    // The listener's certificate (replicas forward callbacks with it) has clientAuth and chains to the KCP CA.
    const ca = createCa({ commonName: 'kcp-pki-ca', keyBits: 2048 });
    const own = issueLeaf({ ca, role: 'listener', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
    await listener.close();
    listener = await startListener({
      host: '127.0.0.1',
      port: 0,
      mode: { kind: 'direct', ...own, caBundlePem: ca.certPem },
      resolveKyma: (runtimeId) => ({ namespace: 'kcp-system', name: `kyma-of-${runtimeId}` }),
      enqueue: (key) => void enqueued.push(key),
    });
    const answer = await sendCallback(listener.port, agentFor({ ...own, caPem: ca.certPem }), {
      body: v2Body(),
    });
    expect(answer.status).to.equal(401);
    expect(answer.json?.message).to.equal(
      "client certificate carries the KCP listener's identity (CN skr-agent-listener), not an SKR runtime-id",
    );
    expect(enqueued).to.have.length(0);
  });

  it('refuses expired, CN-less and server-only certificates of the KCP CA with 401', async function () {
    const key = createTestKey();
    const expired = issueTestLeaf(kcpCa, {
      commonName: 'runtime-a',
      key,
      notBefore: new Date(Date.now() - 3 * 24 * 3600_000),
      notAfter: new Date(Date.now() - 24 * 3600_000),
    });
    const nameless = issueTestLeaf(kcpCa, { commonName: null, dnsNames: ['skr-a.example.com'], key });
    const serverOnly = issueTestLeaf(kcpCa, { commonName: 'runtime-a', usages: ['serverAuth'], key });
    const cases: [string, { certPem: string; keyPem: string }, RegExp][] = [
      ['expired', expired, /^client certificate expired at [A-Z][a-z]{2} .* GMT; the KCP agent renews/],
      ['without CN', nameless, /no subject CN/],
      ['without clientAuth', serverOnly, /^client certificate is not for client use \(no clientAuth/],
    ];
    for (const [label, pair, reason] of cases) {
      const answer = await sendCallback(listener.port, agentFor({ ...pair, caPem: kcpCa.certPem }), {
        body: v2Body(),
      });
      expect(answer.status, label).to.equal(401);
      expect(answer.json?.message, label).to.match(reason);
    }
    expect(enqueued).to.have.length(0);
  });

  it('refuses a TLS 1.2 client offering only static-RSA or CBC suites, before and after updateTls', async function () {
    const handshake = (ciphers: string) =>
      new Promise<string>((resolve) => {
        const socket = connect({
          host: '127.0.0.1',
          port: listener.port,
          ...skrA,
          ca: kcpCa.certPem,
          maxVersion: 'TLSv1.2',
          ciphers,
        });
        socket.once('secureConnect', () => {
          resolve(`connected ${socket.getCipher().name}`);
          socket.destroy();
        });
        socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
      });
    for (const round of ['at start', 'after updateTls']) {
      expect(await handshake('AES128-SHA'), round).to.not.match(/^connected/);
      expect(await handshake('AES256-SHA256'), round).to.not.match(/^connected/);
      expect(await handshake('ECDHE-RSA-AES128-GCM-SHA256'), round).to.equal(
        'connected ECDHE-RSA-AES128-GCM-SHA256',
      );
      listener.updateTls({ ...serving, caBundlePem: kcpCa.certPem });
    }
  });

  it('answers 403 for an identity that no Kyma carries', async function () {
    const orphan = { ...issueTestLeaf(kcpCa, { commonName: 'runtime-orphan' }), caPem: kcpCa.certPem };
    const answer = await sendCallback(listener.port, agentFor(orphan), { body: v2Body() });
    expect(answer.status).to.equal(403);
    expect(answer.json?.message).to.equal('no Kyma is labelled kyma-project.io/runtime-id=runtime-orphan');
    expect(enqueued).to.have.length(0);
  });

  it("answers 403 when A's v1 owner names B's Kyma, and B is not woken", async function () {
    const agent = agentFor(skrA);
    const path = '/v1/lifecycle-manager/event';
    const foreign = await sendCallback(listener.port, agent, { path, body: v1Body(KYMAS['runtime-b']!) });
    expect(foreign.status).to.equal(403);
    expect(foreign.json?.message).to.match(
      /owner kcp-system\/kyma-b is not the Kyma of runtime-id runtime-a/,
    );
    expect(enqueued).to.have.length(0);
    const own = await sendCallback(listener.port, agent, { path, body: v1Body(KYMAS['runtime-a']!) });
    expect(own.status).to.equal(200);
    expect(enqueued).to.deep.equal(['kcp-system/kyma-a']);
    expect(accepted[0]?.contract).to.equal('v1');
  });

  it('answers 400 for bad JSON and for invalid fields, naming the field', async function () {
    const agent = agentFor(skrA);
    const badJson = await sendCallback(listener.port, agent, { body: '{"watched":' });
    expect(badJson.status).to.equal(400);
    expect(badJson.json?.message).to.match(/not UTF-8 JSON/);
    const badField = await sendCallback(listener.port, agent, {
      body: JSON.stringify({
        watched: { Namespace: 'x', Name: 'Not_A_Name' },
        watchedGvk: { group: '', version: 'v1', kind: 'Pod' },
      }),
    });
    expect(badField.status).to.equal(400);
    expect(badField.json?.message).to.match(/watched\.Name/);
    const v1WithoutOwner = await sendCallback(listener.port, agent, {
      path: '/v1/lifecycle-manager/event',
      body: v2Body(),
    });
    expect(v1WithoutOwner.status).to.equal(400);
    expect(v1WithoutOwner.json?.message).to.match(/owner/);
    const invalidUtf8 = await sendCallback(listener.port, agent, {
      body: Buffer.from([0x7b, 0xff, 0xfe, 0x7d]),
    });
    expect(invalidUtf8.status).to.equal(400);
    expect(enqueued).to.have.length(0);
    // The connection survives client errors: the next event on it is accepted.
    expect((await sendCallback(listener.port, agent, { body: v2Body() })).status).to.equal(200);
  });

  it('answers 404 for unknown paths and 405 with Allow for other methods', async function () {
    const agent = agentFor(skrA);
    for (const path of [
      '/',
      '/v3/lifecycle-manager/event',
      '/v2/lifecycle-manager/event/',
      '/v2/Bad_Name/event',
    ]) {
      expect((await sendCallback(listener.port, agent, { path, body: v2Body() })).status, path).to.equal(404);
    }
    for (const method of ['GET', 'PUT', 'DELETE', 'PATCH']) {
      const answer = await sendCallback(listener.port, agent, {
        method,
        body: method === 'GET' ? '' : v2Body(),
      });
      expect(answer.status, method).to.equal(405);
      expect(answer.headers.allow).to.equal('POST');
    }
    // A query string does not change the route.
    expect(
      (await sendCallback(listener.port, agent, { path: '/v2/lifecycle-manager/event?x=1', body: v2Body() }))
        .status,
    ).to.equal(200);
  });

  it('answers 415 for bodies that are not application/json', async function () {
    const agent = agentFor(skrA);
    for (const type of [
      'text/plain',
      'application/x-www-form-urlencoded',
      'application/json; charset=latin1',
      '',
    ]) {
      const answer = await sendCallback(listener.port, agent, {
        body: v2Body(),
        headers: { 'content-type': type },
      });
      expect(answer.status, type).to.equal(415);
    }
    const gzip = await sendCallback(listener.port, agent, {
      body: v2Body(),
      headers: { 'content-encoding': 'gzip' },
    });
    expect(gzip.status).to.equal(415);
    const charset = await sendCallback(listener.port, agent, {
      body: v2Body(),
      headers: { 'content-type': 'Application/JSON; charset="UTF-8"' },
    });
    expect(charset.status).to.equal(200);
  });

  it('accepts exactly 16 KiB and answers 413 above it, declared or streamed, keeping the connection usable', async function () {
    const agent = agentFor(skrA);
    const valid = v2Body();
    const atLimit = valid + ' '.repeat(16 * 1024 - valid.length);
    expect((await sendCallback(listener.port, agent, { body: atLimit })).status).to.equal(200);
    const overLimit = atLimit + ' ';
    const declared = await sendCallback(listener.port, agent, { body: overLimit });
    expect(declared.status).to.equal(413);
    expect(declared.json?.reason).to.equal('RequestEntityTooLarge');
    const streamed = await sendCallback(listener.port, agent, {
      body: valid + ' '.repeat(200 * 1024),
      chunked: true,
    });
    expect(streamed.status).to.equal(413);
    expect(enqueued).to.deep.equal(['kcp-system/kyma-a']);
    expect((await sendCallback(listener.port, agent, { body: valid })).status).to.equal(200);
  });

  it('answers 413 to a huge declared body without reading it', async function () {
    // Raw TLS: declare 100 MiB, send none of it; the answer must come at once.
    const socket = connect({
      host: '127.0.0.1',
      port: listener.port,
      ca: kcpCa.certPem,
      cert: skrA.certPem,
      key: skrA.keyPem,
      servername: 'localhost',
    });
    const response = await new Promise<string>((resolve, reject) => {
      let text = '';
      socket.on('secureConnect', () =>
        socket.write(
          'POST /v2/lifecycle-manager/event HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 104857600\r\n\r\n',
        ),
      );
      socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
    });
    expect(response).to.match(/^HTTP\/1\.1 413 /);
    expect(response).to.match(/connection: close/i);
  });

  it('answers malformed HTTP with a JSON 400 and keeps serving', async function () {
    const socket = connect({
      host: '127.0.0.1',
      port: listener.port,
      ca: kcpCa.certPem,
      cert: skrA.certPem,
      key: skrA.keyPem,
      servername: 'localhost',
    });
    const response = await new Promise<string>((resolve, reject) => {
      let text = '';
      socket.on('secureConnect', () => socket.write('NOT HTTP AT ALL\r\n\r\n'));
      socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
    });
    expect(response).to.match(/^HTTP\/1\.1 400 /);
    expect((await sendCallback(listener.port, agentFor(skrA), { body: v2Body() })).status).to.equal(200);
  });

  it('counts requests by code, durations and accepted events in its metrics', async function () {
    const agent = agentFor(skrA);
    await sendCallback(listener.port, agent, { body: v2Body() });
    await sendCallback(listener.port, agent, { body: '[' });
    await sendCallback(listener.port, agent, {
      path: '/v1/lifecycle-manager/event',
      body: v1Body(KYMAS['runtime-a']!),
    });
    const text = await registry.metrics();
    expect(text).to.match(/skr_listener_requests_total\{code="200"\} 2/);
    expect(text).to.match(/skr_listener_requests_total\{code="400"\} 1/);
    expect(text).to.match(/skr_listener_events_accepted_total\{contract="v2"\} 1/);
    expect(text).to.match(/skr_listener_events_accepted_total\{contract="v1"\} 1/);
    expect(text).to.match(/skr_listener_request_duration_seconds_count\{code="200"\} 2/);
    expect(text).to.match(/skr_listener_enqueued_total 2/);
  });

  it('trusts several CAs during a rotation and drops the old one on updateTls', async function () {
    const newCa = createTestCa('kcp-ca-next');
    const skrANew = { ...issueTestLeaf(newCa, { commonName: 'runtime-a' }), caPem: kcpCa.certPem };
    // Phase 1: the bundle holds both CAs; old and re-issued leaves are both accepted.
    listener.updateTls({ ...serving, caBundlePem: kcpCa.certPem + newCa.certPem });
    const oldAgent = agentFor(skrA);
    expect((await sendCallback(listener.port, oldAgent, { body: v2Body() })).status).to.equal(200);
    expect((await sendCallback(listener.port, agentFor(skrANew), { body: v2Body() })).status).to.equal(200);
    // Phase 2: the old CA is dropped. The kept-alive old connection is retired; a new handshake is refused.
    listener.updateTls({ ...serving, caBundlePem: newCa.certPem });
    // The server closes the idle connection at once; give the close a moment to reach the client's agent.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const refused = await sendCallback(listener.port, oldAgent, { body: v2Body() });
    expect(refused.status).to.equal(401);
    expect((await sendCallback(listener.port, agentFor(skrANew), { body: v2Body() })).status).to.equal(200);
    expect(await registry.metrics()).to.match(/skr_listener_tls_updates_total 2/);
  });

  it('serves nothing more on a connection verified before updateTls, even one caught mid-request', async function () {
    const socket = connect({
      host: '127.0.0.1',
      port: listener.port,
      ca: kcpCa.certPem,
      cert: skrA.certPem,
      key: skrA.keyPem,
      servername: 'localhost',
    });
    await new Promise<void>((resolve, reject) => {
      socket.once('secureConnect', resolve);
      socket.once('error', reject);
    });
    const body = v2Body();
    const received = new Promise<string>((resolve) => {
      let text = '';
      socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
      socket.on('error', () => undefined);
      socket.on('close', () => resolve(text));
    });
    // Half a request is on the wire when the CA bundle changes; the rest follows after.
    socket.write(
      `POST /v2/lifecycle-manager/event HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n`,
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    listener.updateTls({ ...serving, caBundlePem: createTestCa('unrelated-ca').certPem });
    if (socket.writable) socket.end(`Content-Length: ${body.length}\r\n\r\n${body}`);
    expect(await received).not.to.match(/HTTP\/1\.1 200/);
    expect(enqueued).to.have.length(0);
  });

  it('rejects broken TLS material with a clear error and keeps the old one', async function () {
    expect(() => listener.updateTls({ ...serving, caBundlePem: 'not a pem' })).to.throw(
      /CA bundle holds no PEM certificate/,
    );
    const other = issueTestLeaf(kcpCa, { commonName: 'x', usages: ['serverAuth'] });
    expect(() =>
      listener.updateTls({ certPem: serving.certPem, keyPem: other.keyPem, caBundlePem: kcpCa.certPem }),
    ).to.throw(/serving key is unusable/);
    expect(() => listener.updateTls({ ...serving, caBundlePem: skrA.certPem! })).to.throw(/is not a CA/);
    expect((await sendCallback(listener.port, agentFor(skrA), { body: v2Body() })).status).to.equal(200);
  });

  it('answers 500 when resolveKyma throws, and keeps serving', async function () {
    const failing = await startListener({
      host: '127.0.0.1',
      port: 0,
      mode: { kind: 'direct', ...serving, caBundlePem: kcpCa.certPem },
      resolveKyma: () => {
        throw new Error('informer cache not synced');
      },
      enqueue: () => undefined,
    });
    try {
      const agent = agentFor(skrA);
      expect((await sendCallback(failing.port, agent, { body: v2Body() })).status).to.equal(500);
      expect((await sendCallback(failing.port, agent, { body: v2Body() })).status).to.equal(500);
    } finally {
      await failing.close();
    }
  });

  it('close() stops accepting connections and waits for requests in flight', async function () {
    const agent = agentFor(skrA);
    expect((await sendCallback(listener.port, agent, { body: v2Body() })).status).to.equal(200);
    await listener.close();
    let error: unknown;
    try {
      await sendCallback(listener.port, agentFor(skrA), { body: v2Body() });
    } catch (caught) {
      error = caught;
    }
    expect((error as NodeJS.ErrnoException | undefined)?.code).to.equal('ECONNREFUSED');
  });

  it('coalesces a burst for one Kyma into one enqueue with a coalescing window', async function () {
    const keys: string[] = [];
    // A manual clock: the burst falls inside the window however slowly the machine sends it.
    const clock = new ManualClock();
    const windowed = await startListener({
      host: '127.0.0.1',
      port: 0,
      mode: { kind: 'direct', ...serving, caBundlePem: kcpCa.certPem },
      resolveKyma: (runtimeId) => KYMAS[runtimeId],
      enqueue: (key) => void keys.push(key),
      coalesceWindowMs: 200,
      clock,
    });
    try {
      const a = agentFor(skrA);
      const b = agentFor(skrB);
      for (let i = 0; i < 10; i++) {
        await Promise.all([
          sendCallback(windowed.port, a, { body: v2Body(`a-${i}`) }),
          sendCallback(windowed.port, b, { body: v2Body(`b-${i}`) }),
        ]);
      }
      expect(keys).to.have.length(0);
      await clock.advance(199);
      expect(keys, 'held until the window ends').to.have.length(0);
      await clock.advance(1);
      expect(keys.sort()).to.deep.equal(['kcp-system/kyma-a', 'kcp-system/kyma-b']);
      await sendCallback(windowed.port, a, { body: v2Body('late') });
    } finally {
      await windowed.close();
    }
    // Keys held at shutdown are released, not lost: their events were answered 200.
    expect(keys.sort()).to.deep.equal(['kcp-system/kyma-a', 'kcp-system/kyma-a', 'kcp-system/kyma-b']);
  });
});
