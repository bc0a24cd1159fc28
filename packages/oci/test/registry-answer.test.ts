// Reading a registry's answer over a real socket: a body within its bound comes back whole, a chunked one past it
// is refused as it passes the bound, and an error answer becomes a reason and words a user can act on, in the
// registry's own words when it gave some.
import { expect } from 'chai';
import { Agent, type Dispatcher } from 'undici';
import { ModuleSourceError } from '../src/index.js';
import { answerFailure, classifyNetworkError, readBounded, type Answer } from '../src/registry-answer.js';
import { startLocalHttp, type LocalHttp } from './local-http.js';
import { failure } from './hand-assembled.js';

const REGISTRY = { host: 'registry.test', hasCredentials: false };

describe('registry answers', function () {
  this.timeout(30_000);
  let server: LocalHttp;
  let agent: Dispatcher;
  /** Sent by the server for each path: status, headers, body chunks. */
  const routes = new Map<string, { status: number; headers?: Record<string, string>; chunks: Buffer[] }>();

  before(async () => {
    server = await startLocalHttp((request, response) => {
      const route = routes.get(request.url ?? '');
      if (!route) {
        response.writeHead(500).end();
        return;
      }
      response.writeHead(route.status, route.headers);
      for (const chunk of route.chunks) response.write(chunk);
      response.end();
    });
    agent = new Agent();
  });

  after(async () => {
    await agent.close();
    await server.close();
  });

  async function get(path: string): Promise<Answer> {
    const response = await agent.request({ origin: server.url, path, method: 'GET' });
    return { status: response.statusCode, headers: response.headers, body: response.body };
  }

  it('returns a body within the bound whole, chunk after chunk', async () => {
    const chunks = [Buffer.alloc(700, 'a'), Buffer.alloc(300, 'b')];
    routes.set('/within', { status: 200, chunks });
    const bytes = await readBounded(await get('/within'), 1_000, 'blob x', REGISTRY.host);
    expect(bytes.equals(Buffer.concat(chunks))).to.equal(true);
  });

  it('refuses a chunked body as soon as it passes the bound', async () => {
    routes.set('/chunked', {
      status: 200,
      headers: { 'transfer-encoding': 'chunked' },
      chunks: [Buffer.alloc(600), Buffer.alloc(600), Buffer.alloc(600)],
    });
    const error = await failure(
      readBounded(await get('/chunked'), 1_000, 'blob x', REGISTRY.host),
      'TooLarge',
    );
    expect(error.message).to.equal('blob x is more than the bound of 1000 bytes');
  });

  it("says NotFound for a 404, with the registry's error codes and messages", async () => {
    const body = JSON.stringify({ errors: [{ code: 'MANIFEST_UNKNOWN', message: 'manifest unknown' }] });
    routes.set('/missing', { status: 404, chunks: [Buffer.from(body)] });
    const error = await answerFailure(await get('/missing'), 'manifest a:1', REGISTRY);
    expect(error).to.be.instanceOf(ModuleSourceError);
    expect(error.reason).to.equal('NotFound');
    expect(error.status).to.equal(404);
    expect(error.message).to.equal(
      'manifest a:1 at registry.test: not found (MANIFEST_UNKNOWN manifest unknown)',
    );
  });

  it('says Unauthorized for a 401 or 403, and whether credentials were configured', async () => {
    routes.set('/refused', { status: 403, chunks: [] });
    const anonymous = await answerFailure(await get('/refused'), 'blob x', REGISTRY);
    expect(anonymous.reason).to.equal('Unauthorized');
    expect(anonymous.message).to.equal(
      'blob x at registry.test: access refused (403, no credentials configured)',
    );
    const credentialed = await answerFailure(await get('/refused'), 'blob x', {
      ...REGISTRY,
      hasCredentials: true,
    });
    expect(credentialed.message).to.equal('blob x at registry.test: access refused (403)');
  });

  it('says TooLarge for a 413 and RegistryError for other statuses, whatever the body', async () => {
    routes.set('/too-large', { status: 413, chunks: [Buffer.from('<html>nope</html>')] });
    routes.set('/broken', { status: 502, chunks: [Buffer.from('Bad Gateway')] });
    expect((await answerFailure(await get('/too-large'), 'upload', REGISTRY)).reason).to.equal('TooLarge');
    const broken = await answerFailure(await get('/broken'), 'catalog', REGISTRY);
    expect(broken.reason).to.equal('RegistryError');
    expect(broken.message).to.equal('catalog at registry.test: answered 502');
  });

  it('tells a timeout from a registry that cannot be reached', async () => {
    const closed = await startLocalHttp(() => {});
    await closed.close();
    const refused = await agent
      .request({ origin: closed.url, path: '/', method: 'GET' })
      .catch((e: unknown) => e);
    expect(classifyNetworkError(refused)).to.deep.equal({
      reason: 'RegistryUnreachable',
      text: 'is unreachable (ECONNREFUSED)',
    });
    const timeout = new DOMException('The operation was aborted due to timeout', 'TimeoutError');
    expect(classifyNetworkError(timeout)).to.deep.equal({
      reason: 'RegistryTimeout',
      text: 'did not answer in time',
    });
  });
});
