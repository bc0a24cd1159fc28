// One request to a registry, alone: redirects are followed for GETs only, a few hops deep, to the host asked or a
// host allowed by name, and credentials never go with them to another origin; every hop, error and timeout is
// counted by operation and code. The policy is checked as a function, the exchange over real sockets.
import { expect } from 'chai';
import { Registry as Metrics } from '@skr-watcher/telemetry';
import { ModuleSourceError } from '../src/index.js';
import { RegistryExchange } from '../src/registry-exchange.js';
import { MAX_REDIRECTS, RedirectPolicy } from '../src/registry-redirect.js';
import { failure } from './hand-assembled.js';
import { startLocalHttp, type LocalHttp } from './local-http.js';

describe('RedirectPolicy', () => {
  const policy = new RedirectPolicy(['blobs.example:8443']);
  const from = new URL('https://registry.example/v2/a/blobs/sha256:1');
  const asked = { status: 307, askedHost: 'registry.example', operation: 'blob' };

  it('follows a 3xx with a Location for GETs only, up to MAX_REDIRECTS hops', () => {
    expect(policy.follows('GET', 307, '/elsewhere', 0)).to.equal(true);
    expect(policy.follows('GET', 301, '/elsewhere', MAX_REDIRECTS - 1)).to.equal(true);
    expect(policy.follows('GET', 302, '/elsewhere', MAX_REDIRECTS)).to.equal(false);
    expect(policy.follows('GET', 307, undefined, 0)).to.equal(false);
    expect(policy.follows('GET', 200, '/elsewhere', 0)).to.equal(false);
    for (const method of ['HEAD', 'POST', 'PUT'] as const)
      expect(policy.follows(method, 307, '/elsewhere', 0), method).to.equal(false);
  });

  it('resolves a relative Location against the URL it came from', () => {
    expect(policy.next(from, { ...asked, location: '../other' }).href).to.equal(
      'https://registry.example/v2/a/other',
    );
  });

  it('goes to the host asked or an allowed host, and refuses any other, naming it', () => {
    expect(policy.next(from, { ...asked, location: 'https://blobs.example:8443/x' }).host).to.equal(
      'blobs.example:8443',
    );
    expect(policy.next(from, { ...asked, location: 'https://registry.example/y' }).host).to.equal(
      'registry.example',
    );
    let refused: unknown;
    try {
      policy.next(from, { ...asked, location: 'http://169.254.169.254/latest' });
    } catch (error) {
      refused = error;
    }
    expect(refused).to.be.instanceOf(ModuleSourceError);
    expect(refused).to.deep.include({ reason: 'RegistryError', status: 307 });
    expect((refused as Error).message).to.equal(
      "registry registry.example redirected blob to 169.254.169.254, which is not the registry's host or an allowed redirect host",
    );
  });
});

describe('RegistryExchange (real sockets)', function () {
  this.timeout(30_000);
  let store: LocalHttp;
  let registry: LocalHttp;
  /** How many hops the registry redirects within itself before sending to the store. */
  let innerHops = 0;

  before(async () => {
    store = await startLocalHttp((_request, response) => void response.writeHead(200).end('blob bytes'));
    registry = await startLocalHttp((request, response) => {
      const hop = Number(new URL(request.url ?? '/', 'http://x').searchParams.get('hop') ?? '0');
      if (request.url?.startsWith('/silent')) return; // never answers
      if (hop < innerHops) response.writeHead(302, { location: `/v2/blob?hop=${hop + 1}` }).end();
      else response.writeHead(307, { location: `${store.url}/stored${request.url ?? ''}` }).end();
    });
  });

  after(async () => {
    await registry.close();
    await store.close();
  });

  beforeEach(() => {
    registry.seen.length = 0;
    store.seen.length = 0;
    innerHops = 0;
  });

  async function counted(metrics: Metrics): Promise<Record<string, number>> {
    const metric = await metrics.getSingleMetric('skr_agent_oci_registry_requests_total')?.get();
    return Object.fromEntries(
      (metric?.values ?? []).map(({ labels, value }) => [`${labels['operation']} ${labels['code']}`, value]),
    );
  }

  it('follows a redirect to an allowed host without the credentials, and counts each hop', async () => {
    const metrics = new Metrics();
    const exchange = new RegistryExchange({ timeoutMs: 5_000, redirectHosts: [store.host], metrics });
    try {
      const answer = await exchange.request('blob', 'GET', `${registry.url}/v2/blob`, {
        authorization: 'Bearer secret',
      });
      expect(answer.status).to.equal(200);
      expect(await answer.body.text()).to.equal('blob bytes');
      expect(registry.seen[0]?.headers['authorization']).to.equal('Bearer secret');
      expect(store.seen).to.have.length(1);
      expect(store.seen[0]?.headers['authorization']).to.equal(undefined);
      expect(await counted(metrics)).to.deep.equal({ 'blob 307': 1, 'blob 200': 1 });
      expect(exchange.sent.blob).to.equal(2);
    } finally {
      await exchange.close();
    }
  });

  it('refuses a redirect to a host not allowed, without sending anything there', async () => {
    const exchange = new RegistryExchange({ timeoutMs: 5_000 });
    try {
      const error = await failure(
        exchange.request('manifest', 'GET', `${registry.url}/v2/m`, {}),
        'RegistryError',
      );
      expect(error.message).to.include(`redirected manifest to ${store.host}`);
      expect(store.seen).to.have.length(0);
    } finally {
      await exchange.close();
    }
  });

  it(`gives back the answer after ${MAX_REDIRECTS} hops instead of following on`, async () => {
    innerHops = 10;
    const exchange = new RegistryExchange({ timeoutMs: 5_000 });
    try {
      const answer = await exchange.request('blob', 'GET', `${registry.url}/v2/blob`, {});
      await answer.body.dump();
      expect(answer.status).to.equal(302);
      expect(registry.seen).to.have.length(MAX_REDIRECTS + 1);
    } finally {
      await exchange.close();
    }
  });

  it('counts a registry that is down as error and one that does not answer as timeout', async () => {
    const metrics = new Metrics();
    const exchange = new RegistryExchange({ timeoutMs: 300, metrics });
    const down = await startLocalHttp(() => {});
    await down.close();
    try {
      const unreachable = await failure(exchange.request('tags', 'GET', `${down.url}/v2/a/tags/list`, {}));
      expect(unreachable.reason).to.equal('RegistryUnreachable');
      expect(unreachable.message).to.equal(`registry ${down.host} is unreachable (ECONNREFUSED)`);
      const silent = await failure(exchange.request('catalog', 'GET', `${registry.url}/silent`, {}));
      expect(silent.reason).to.equal('RegistryTimeout');
      expect(await counted(metrics)).to.deep.equal({ 'tags error': 1, 'catalog timeout': 1 });
    } finally {
      await exchange.close();
    }
  });
});
