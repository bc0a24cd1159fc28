// How requests to a registry are authorized, against a real token service: after a Bearer challenge a token per
// scope, fetched once while it lives and renewed shortly before it expires; Basic credentials for a Basic
// challenge and for the token service; refusals in words that say which credentials were refused.
import { expect } from 'chai';
import { RegistryAuth, basicAuthorization, type Challenge } from '../src/registry-auth.js';
import type { RegistryCredentials } from '../src/registry-config.js';
import { RegistryExchange } from '../src/registry-exchange.js';
import { failure } from './hand-assembled.js';
import { startLocalHttp, type LocalHttp } from './local-http.js';

const SCOPE_A = 'repository:a:pull';
const SCOPE_B = 'repository:b:pull';
const CREDENTIALS: RegistryCredentials = { kind: 'basic', username: 'robot', password: 's3cret' };

describe('RegistryAuth (real token service)', function () {
  this.timeout(30_000);
  let tokens: LocalHttp;
  let exchange: RegistryExchange;
  /** What the token service answers; by default a token named after the scope and the request count. */
  let answer: (scope: string, authorization: string | undefined) => { status: number; body: unknown };
  let now = 0;

  before(async () => {
    tokens = await startLocalHttp((request, response) => {
      const scope = new URL(request.url ?? '/', 'http://x').searchParams.get('scope') ?? '';
      const { status, body } = answer(scope, request.headers['authorization']);
      // A little later, so requests of one moment overlap.
      setTimeout(() => response.writeHead(status).end(JSON.stringify(body)), 20);
    });
  });

  after(async () => {
    await tokens.close();
  });

  beforeEach(() => {
    tokens.seen.length = 0;
    now = 0;
    answer = (scope) => ({ status: 200, body: { token: `${scope}#${tokens.seen.length}`, expires_in: 60 } });
    exchange = new RegistryExchange({ timeoutMs: 5_000 });
  });

  afterEach(async () => {
    await exchange.close();
  });

  function auth(credentials?: RegistryCredentials) {
    return new RegistryAuth({ host: 'registry.test', credentials, exchange, now: () => now });
  }

  function bearer(scope = SCOPE_A): Challenge {
    return { scheme: 'bearer', params: { realm: `${tokens.url}/token`, service: 'registry.test', scope } };
  }

  it('asks for nothing before a challenge, then for a token of the scope the challenge names', async () => {
    const subject = auth();
    expect(await subject.authorizationFor(SCOPE_A)).to.equal(undefined);
    expect(await subject.answerChallenge(bearer(), SCOPE_A)).to.equal(`Bearer ${SCOPE_A}#1`);
    const asked = new URL(tokens.seen[0]!.url, 'http://x').searchParams;
    expect(Object.fromEntries(asked)).to.deep.equal({ service: 'registry.test', scope: SCOPE_A });
    expect(tokens.seen[0]!.headers['authorization']).to.equal(undefined);
  });

  it('after one challenge, fetches a token for a new scope up front, once while it lives', async () => {
    const subject = auth();
    await subject.answerChallenge(bearer(), SCOPE_A);
    expect(await subject.authorizationFor(SCOPE_B)).to.equal(`Bearer ${SCOPE_B}#2`);
    expect(await subject.authorizationFor(SCOPE_B)).to.equal(`Bearer ${SCOPE_B}#2`);
    expect(await subject.authorizationFor(SCOPE_A)).to.equal(`Bearer ${SCOPE_A}#1`);
    expect(exchange.sent.token).to.equal(2);
  });

  it('shares one token fetch among the requests of a scope that start together', async () => {
    const subject = auth();
    await subject.answerChallenge(bearer(), SCOPE_A);
    const all = await Promise.all(Array.from({ length: 8 }, () => subject.authorizationFor(SCOPE_B)));
    expect(new Set(all)).to.deep.equal(new Set([`Bearer ${SCOPE_B}#2`]));
    expect(tokens.seen).to.have.length(2);
  });

  it('renews a token 10 s before it expires, or halfway for a short-lived one, and after 60 s if none is said', async () => {
    const subject = auth();
    answer = (scope) => ({ status: 200, body: { token: `${scope}#${tokens.seen.length}`, expires_in: 60 } });
    await subject.answerChallenge(bearer(), SCOPE_A);
    now = 49_999;
    expect(await subject.authorizationFor(SCOPE_A)).to.equal(`Bearer ${SCOPE_A}#1`);
    now = 50_000;
    expect(await subject.authorizationFor(SCOPE_A)).to.equal(`Bearer ${SCOPE_A}#2`);

    answer = (scope) => ({
      status: 200,
      body: { access_token: `${scope}#${tokens.seen.length}`, expires_in: 12 },
    });
    now = 0;
    expect(await subject.answerChallenge(bearer(), SCOPE_A)).to.equal(`Bearer ${SCOPE_A}#3`);
    now = 5_999;
    expect(await subject.authorizationFor(SCOPE_A)).to.equal(`Bearer ${SCOPE_A}#3`);
    now = 6_000;
    expect(await subject.authorizationFor(SCOPE_A)).to.equal(`Bearer ${SCOPE_A}#4`);

    answer = (scope) => ({ status: 200, body: { token: `${scope}#${tokens.seen.length}` } });
    now = 0;
    expect(await subject.answerChallenge(bearer(), SCOPE_A)).to.equal(`Bearer ${SCOPE_A}#5`);
    now = 50_000;
    expect(await subject.authorizationFor(SCOPE_A)).to.equal(`Bearer ${SCOPE_A}#6`);
  });

  it('sends Basic credentials to the token service, and says which credentials it refused', async () => {
    const expected = basicAuthorization(CREDENTIALS);
    answer = (scope, authorization) =>
      authorization === expected
        ? { status: 200, body: { token: `${scope}#ok` } }
        : { status: 401, body: { errors: [{ code: 'UNAUTHORIZED', message: 'authentication required' }] } };
    expect(await auth(CREDENTIALS).answerChallenge(bearer(), SCOPE_A)).to.equal(`Bearer ${SCOPE_A}#ok`);

    const wrong = await failure(
      auth({ ...CREDENTIALS, password: 'wrong' }).answerChallenge(bearer(), SCOPE_A),
      'Unauthorized',
    );
    expect(wrong.message).to.equal(`registry.test refused the credentials (token for ${SCOPE_A})`);
    expect(wrong.status).to.equal(401);
    const anonymous = await failure(auth().answerChallenge(bearer(), SCOPE_A), 'Unauthorized');
    expect(anonymous.message).to.equal(`registry.test refused anonymous access (token for ${SCOPE_A})`);
  });

  it('takes a token service answering without a token, or failing, as a registry error', async () => {
    answer = () => ({ status: 200, body: { token: '' } });
    const empty = await failure(auth().answerChallenge(bearer(), SCOPE_A), 'RegistryError');
    expect(empty.message).to.equal('the token service of registry.test answered without a token');
    answer = () => ({ status: 500, body: {} });
    const broken = await failure(auth().answerChallenge(bearer(), SCOPE_A), 'RegistryError');
    expect(broken.message).to.equal(`token for ${SCOPE_A} at registry.test: answered 500`);
  });

  it('answers a Basic challenge with Basic credentials, and has nothing to offer without them', async () => {
    const basic: Challenge = { scheme: 'basic', params: { realm: 'registry' } };
    expect(await auth(CREDENTIALS).answerChallenge(basic, SCOPE_A)).to.equal(basicAuthorization(CREDENTIALS));
    expect(await auth().answerChallenge(basic, SCOPE_A)).to.equal(undefined);
    expect(await auth(CREDENTIALS).answerChallenge(undefined, SCOPE_A)).to.equal(undefined);
    expect(tokens.seen).to.have.length(0);
  });

  it('sends static Bearer credentials with every request, before any challenge', async () => {
    const subject = auth({ kind: 'bearer', token: 'static-token' });
    expect(await subject.authorizationFor(SCOPE_A)).to.equal('Bearer static-token');
    expect(await subject.authorizationFor('registry:catalog:*')).to.equal('Bearer static-token');
    expect(tokens.seen).to.have.length(0);
  });
});
