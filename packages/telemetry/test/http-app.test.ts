import { createServer, type Server } from 'node:http';
import { expect } from 'chai';
import { createHttpApp, listenOn, reply, replyJson } from '../src/index.js';
import { send } from './raw-request.js';

describe('the shared HTTP routing on node:http', () => {
  let server: Server;
  let port: number;

  before(async () => {
    const app = createHttpApp({ methods: ['GET'], headers: { 'x-content-type-options': 'nosniff' } })
      .get('/items/:name', (request, response) =>
        replyJson(response, 200, { name: request.params['name'], view: request.query.get('view') }),
      )
      .get('/throws', () => {
        throw new Error('handler exploded');
      })
      .get('/rejects', async (_request, response) => {
        response.writeHead(200, { 'content-type': 'text/plain' });
        response.write('partial');
        await Promise.resolve();
        throw new Error('after the headers');
      })
      .get(['/', '/text'], (_request, response) => reply(response, 200, 'text\n'));
    server = createServer(app.listener);
    port = await listenOn(server, '127.0.0.1', 0, 'test server');
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('matches paths exactly and decodes a `:name` segment, with the query beside it', async () => {
    const item = await send(port, 'GET', '/items/a%20b?view=wide&view=narrow');
    expect(item.status).to.equal(200);
    expect(item.headers['content-type']).to.equal('application/json; charset=utf-8');
    expect(JSON.parse(item.body)).to.deep.equal({ name: 'a b', view: 'wide' });
    // An encoded slash stays inside its segment; it never reaches another route.
    expect(JSON.parse((await send(port, 'GET', '/items/x%2Fy')).body)).to.include({ name: 'x/y' });
    for (const path of ['/items', '/items/', '/items/a/b', '/Items/a', '/text/', '/items/%E0%A4%A'])
      expect((await send(port, 'GET', path)).status, path).to.equal(404);
    expect((await send(port, 'GET', '/text')).body).to.equal('text\n');
  });

  it('answers other methods with 405 and the Allow it was given, on every answer its headers', async () => {
    const post = await send(port, 'POST', '/text');
    expect([post.status, post.headers['allow']]).to.deep.equal([405, 'GET']);
    expect(post.body).to.equal('method POST is not allowed on /text; use GET\n');
    expect(post.headers['x-content-type-options']).to.equal('nosniff');
    const missing = await send(port, 'GET', '/nowhere');
    expect([missing.status, missing.body]).to.deep.equal([404, 'not found: /nowhere\n']);
    expect(missing.headers['x-content-type-options']).to.equal('nosniff');
  });

  it('answers a handler that throws with 500 and its reason, and cuts one that fails after its headers', async () => {
    const thrown = await send(port, 'GET', '/throws');
    expect([thrown.status, thrown.body]).to.deep.equal([500, 'internal error: handler exploded\n']);
    const cut = await send(port, 'GET', '/rejects').then(
      () => 'answered',
      (error: NodeJS.ErrnoException) => error.code,
    );
    expect(cut).to.equal('ECONNRESET');
    expect((await send(port, 'GET', '/')).status).to.equal(200);
  });
});
