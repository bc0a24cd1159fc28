// The callback client against a real mTLS server: how each answer is classified, timeouts, address parsing.
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { KCP_LISTENER_IDENTITY, type WatchEventV2 } from '@skr-watcher/api';
import { KcpClient, parseKcpAddress, retryAfterOf } from '../src/kcp-client.js';
import { issueLeaf } from '@skr-watcher/pki';
import { testPki, type CertificateAndKey } from './support/certs.js';
import { startMtlsServer } from './support/mtls-server.js';

const EVENT: WatchEventV2 = {
  watched: { Namespace: 'kyma-system', Name: 'default' },
  watchedGvk: { group: 'operator.kyma-project.io', version: 'v1beta2', kind: 'Kyma' },
};

describe('KcpClient', function () {
  this.timeout(30_000);
  const pki = testPki();
  const leaf = pki.leaf('skr-client');
  let server: Server;
  let answer: (path: string) => number | undefined = () => 200;
  let answerHeaders: Record<string, string> = {};
  let client: KcpClient;
  /** A client of SKR `leaf` towards `target`, trusting `caPem`. */
  const oneShotClient = (target: Server, caPem: string, serverCommonName?: string) =>
    new KcpClient({
      address: { host: '127.0.0.1', port: (target.address() as AddressInfo).port },
      material: { cert: leaf.certPem, key: leaf.keyPem, ca: caPem },
      maxSockets: 1,
      timeoutMs: 1000,
      serverCommonName,
    });
  /** A server on 127.0.0.1 presenting `served` (a leaf of the test CA); counts the requests it gets. */
  const serverWithLeaf = async (served: CertificateAndKey) => {
    const counted = { requests: 0 };
    const other = createServer(
      { cert: served.certPem, key: served.keyPem, ca: pki.ca.certPem, requestCert: true },
      (req, res) => {
        counted.requests++;
        req.resume();
        res.writeHead(200).end();
      },
    );
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', () => resolve()));
    const stop = async () => {
      other.closeAllConnections();
      await new Promise((resolve) => other.close(resolve));
    };
    return { server: other, counted, stop };
  };

  before(async () => {
    const serving = pki.listener();
    server = await startMtlsServer(serving, pki.ca.certPem, (req, res) => {
      const status = answer(req.url ?? '');
      if (status !== undefined) res.writeHead(status, answerHeaders).end(`answer ${status}`);
      // undefined: never answer
    });
    client = new KcpClient({
      address: { host: '127.0.0.1', port: (server.address() as AddressInfo).port },
      material: { cert: leaf.certPem, key: leaf.keyPem, ca: pki.ca.certPem },
      maxSockets: 2,
      timeoutMs: 300,
    });
  });
  after(async () => {
    client.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('counts only 2xx as delivered, on /v2/<manager>/event', async () => {
    let path = '';
    answer = (p) => ((path = p), 202);
    expect(await client.send('lifecycle-manager', EVENT)).to.deep.equal({ result: 'delivered', status: 202 });
    expect(path).to.equal('/v2/lifecycle-manager/event');
  });

  for (const [status, result] of [
    [500, 'retry'],
    [503, 'retry'],
    [429, 'retry'],
    [408, 'retry'],
    // The listener may not trust a freshly rotated certificate yet.
    [401, 'retry'],
    [400, 'rejected'],
    [403, 'rejected'],
    [404, 'rejected'],
    [413, 'rejected'],
  ] as const) {
    it(`HTTP ${status} is ${result}`, async () => {
      answer = () => status;
      const outcome = await client.send('lifecycle-manager', EVENT);
      expect(outcome).to.include({ result, status });
      if (outcome.result !== 'delivered') expect(outcome.reason).to.contain(`answer ${status}`);
    });
  }

  it("a retry carries the listener's Retry-After (503 from a replica whose owner did not take it, 429)", async () => {
    try {
      for (const status of [503, 429]) {
        answerHeaders = { 'retry-after': '2' };
        answer = () => status;
        expect(await client.send('lifecycle-manager', EVENT)).to.include({
          result: 'retry',
          status,
          retryAfterMs: 2_000,
        });
      }
      answerHeaders = {};
      expect(await client.send('lifecycle-manager', EVENT)).to.not.have.property('retryAfterMs');
    } finally {
      answerHeaders = {};
    }
  });

  it('reads Retry-After as seconds or an HTTP date, capped, and ignores junk', () => {
    const now = Date.parse('2026-11-26T12:00:00Z');
    expect(retryAfterOf('1', now)).to.equal(1_000);
    expect(retryAfterOf(' 0 ', now)).to.equal(0);
    expect(retryAfterOf('Thu, 26 Nov 2026 12:00:07 GMT', now)).to.equal(7_000);
    expect(retryAfterOf('Thu, 26 Nov 2026 11:00:00 GMT', now), 'a date past is now').to.equal(0);
    expect(retryAfterOf('99999', now)).to.equal(300_000);
    expect(retryAfterOf('soon', now)).to.equal(undefined);
    expect(retryAfterOf('-5', now)).to.equal(undefined);
    expect(retryAfterOf(undefined, now)).to.equal(undefined);
  });

  it('a KCP that never answers is a retry after the timeout, not a hang', async () => {
    answer = () => undefined;
    const outcome = await client.send('lifecycle-manager', EVENT);
    expect(outcome.result).to.equal('retry');
    expect(outcome.result === 'retry' && outcome.reason).to.contain('no answer from KCP within 300 ms');
  });

  it('a server whose certificate the CA bundle does not trust is a retry naming the TLS error', async () => {
    const stranger = testPki('stranger-ca');
    const other = oneShotClient(server, stranger.ca.certPem);
    try {
      const outcome = await other.send('lifecycle-manager', EVENT);
      expect(outcome.result).to.equal('retry');
      expect(outcome.result === 'retry' && outcome.reason).to.match(/certificate/i);
    } finally {
      other.close();
    }
  });

  it("refuses another SKR's leaf (same CA, names 127.0.0.1) serving as the KCP listener; nothing is sent", async () => {
    // What a local-mode SKR holds: a leaf of the KCP CA with serverAuth and IP SAN 127.0.0.1.
    const impostor = await serverWithLeaf(pki.leaf('skr-impostor'));
    const fooled = oneShotClient(impostor.server, pki.ca.certPem);
    try {
      const outcome = await fooled.send('lifecycle-manager', EVENT);
      expect(outcome.result).to.equal('retry');
      expect(outcome.result === 'retry' && outcome.reason).to.equal(
        'ERR_KCP_LISTENER_IDENTITY: the server at 127.0.0.1 is not the KCP listener: ' +
          `its certificate's CN is "skr-impostor", not ${KCP_LISTENER_IDENTITY} (--kcp-server-cn)`,
      );
      expect(impostor.counted.requests).to.equal(0);
    } finally {
      fooled.close();
      await impostor.stop();
    }
  });

  it("with --kcp-server-cn '*' delivers to a KCP gateway whose certificate has a CN of its own, and still checks the host", async () => {
    // Upstream's KCP terminates the callbacks at an Istio gateway whose certificate the KCP CA signed under another name.
    const gateway = await serverWithLeaf(pki.leaf('kcp-gateway'));
    const elsewhere = await serverWithLeaf(
      issueLeaf({
        ca: pki.ca,
        runtimeId: 'kcp-gateway',
        dnsNames: ['gateway.kcp.example.com'],
        keyBits: 2048,
      }),
    );
    const anyName = oneShotClient(gateway.server, pki.ca.certPem, '*');
    const wrongHost = oneShotClient(elsewhere.server, pki.ca.certPem, '*');
    try {
      expect(await anyName.send('lifecycle-manager', EVENT)).to.deep.equal({
        result: 'delivered',
        status: 200,
      });
      const outcome = await wrongHost.send('lifecycle-manager', EVENT);
      expect(outcome.result).to.equal('retry');
      expect(outcome.result === 'retry' && outcome.reason).to.match(/ERR_TLS_CERT_ALTNAME_INVALID/);
      expect([gateway.counted.requests, elsewhere.counted.requests]).to.deep.equal([1, 0]);
    } finally {
      anyName.close();
      wrongHost.close();
      await gateway.stop();
      await elsewhere.stop();
    }
  });

  it('parses KCP_ADDR forms and refuses the rest', () => {
    expect(parseKcpAddress('skr-events.kcp.example.com:443')).to.deep.equal({
      host: 'skr-events.kcp.example.com',
      port: 443,
    });
    expect(parseKcpAddress('[::1]:8443')).to.deep.equal({ host: '::1', port: 8443 });
    for (const bad of ['', 'host', 'host:0', 'host:70000', 'https://host:443', 'a b:1']) {
      expect(() => parseKcpAddress(bad), bad).to.throw(/must be host:port/);
    }
  });
});
