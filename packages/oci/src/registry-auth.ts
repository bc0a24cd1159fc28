// How requests to one registry are authorized: anonymous, static Bearer credentials, Basic on a Basic challenge,
// and the Docker token flow (401 + WWW-Authenticate: Bearer realm,service,scope → a token for that scope from the
// realm). Tokens are cached per scope until shortly before they expire and fetched once per scope at a time; after
// one Bearer challenge, tokens for new scopes are asked for up front (one round trip less per repository).
import { ModuleSourceError } from './errors.js';
import { answerFailure, readBounded } from './registry-answer.js';
import type { RegistryExchange } from './registry-exchange.js';
import type { RegistryCredentials } from './registry-config.js';

/** Lifetime of a token whose answer gives none. */
const TOKEN_TTL_DEFAULT_S = 60;
/** Bound of a token service's answer. */
const TOKEN_BODY_BYTES = 64 * 1024;

export interface Challenge {
  scheme: string;
  params: Record<string, string>;
}

/** `Bearer realm="…",service="…",scope="…"` → its scheme and parameters. */
export function parseChallenge(header: string | undefined): Challenge | undefined {
  if (!header) return undefined;
  const match = /^\s*(\w+)\s*(.*)$/s.exec(header);
  if (!match) return undefined;
  const params: Record<string, string> = {};
  for (const param of match[2]!.matchAll(/(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))/g)) {
    params[param[1]!.toLowerCase()] = (param[2] ?? param[3] ?? '').replace(/\\(.)/g, '$1');
  }
  return { scheme: match[1]!.toLowerCase(), params };
}

export function basicAuthorization(credentials: { username: string; password: string }): string {
  return `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}`;
}

export interface RegistryAuthOptions {
  /** host[:port] of the registry, for error messages. */
  host: string;
  credentials?: RegistryCredentials | undefined;
  /** Sends the token requests (counted as operation `token`). */
  exchange: Pick<RegistryExchange, 'request'>;
  /** Epoch ms; injectable so token expiry can be tested without waiting. */
  now?: () => number;
}

export class RegistryAuth {
  private readonly tokens = new Map<string, { token: string; expiresAt: number }>();
  private readonly tokenFetches = new Map<string, Promise<string>>();
  private bearerRealm: { realm: string; service: string | undefined } | undefined;
  private readonly now: () => number;

  constructor(private readonly options: RegistryAuthOptions) {
    this.now = options.now ?? Date.now;
  }

  /** The Authorization header for a first request in `scope`, if one is known before the registry asks. */
  async authorizationFor(scope: string): Promise<string | undefined> {
    if (this.options.credentials?.kind === 'bearer') return `Bearer ${this.options.credentials.token}`;
    if (!this.bearerRealm) return undefined;
    return `Bearer ${await this.token(scope)}`;
  }

  /** After a 401 with `challenge` to a request in `scope`: the Authorization to try once more with, if any. */
  async answerChallenge(challenge: Challenge | undefined, scope: string): Promise<string | undefined> {
    if (challenge?.scheme === 'bearer' && challenge.params['realm']) {
      this.bearerRealm = { realm: challenge.params['realm'], service: challenge.params['service'] };
      this.tokens.delete(scope);
      return `Bearer ${await this.token(challenge.params['scope'] ?? scope)}`;
    }
    if (challenge?.scheme === 'basic' && this.options.credentials?.kind === 'basic') {
      return basicAuthorization(this.options.credentials);
    }
    return undefined;
  }

  /** A token for `scope` from the realm last seen: cached, one fetch per scope at a time. */
  private async token(scope: string): Promise<string> {
    const cached = this.tokens.get(scope);
    if (cached && cached.expiresAt > this.now()) return cached.token;
    const running = this.tokenFetches.get(scope);
    if (running) return running;
    const fetching = this.fetchToken(scope).finally(() => this.tokenFetches.delete(scope));
    this.tokenFetches.set(scope, fetching);
    return fetching;
  }

  private async fetchToken(scope: string): Promise<string> {
    const { host, credentials } = this.options;
    const { realm, service } = this.bearerRealm!;
    const url = new URL(realm);
    if (service) url.searchParams.set('service', service);
    url.searchParams.set('scope', scope);
    const authorization = credentials?.kind === 'basic' ? basicAuthorization(credentials) : undefined;
    const answer = await this.options.exchange.request('token', 'GET', url.toString(), { authorization });
    if (answer.status !== 200) {
      const failure = await answerFailure(answer, `token for ${scope}`, {
        host,
        hasCredentials: credentials !== undefined,
      });
      throw answer.status === 401 || answer.status === 403
        ? new ModuleSourceError(
            'Unauthorized',
            `${host} refused ${credentials ? 'the credentials' : 'anonymous access'} (token for ${scope})`,
            { status: answer.status, cause: failure },
          )
        : failure;
    }
    const body = JSON.parse((await readBounded(answer, TOKEN_BODY_BYTES, 'token', host)).toString()) as {
      token?: unknown;
      access_token?: unknown;
      expires_in?: unknown;
    };
    const token = typeof body.token === 'string' ? body.token : body.access_token;
    if (typeof token !== 'string' || token === '') {
      throw new ModuleSourceError('RegistryError', `the token service of ${host} answered without a token`);
    }
    const ttl =
      typeof body.expires_in === 'number' && body.expires_in > 0 ? body.expires_in : TOKEN_TTL_DEFAULT_S;
    // Renew a little early: a token that expires in flight costs a 401 and a retry.
    this.tokens.set(scope, { token, expiresAt: this.now() + Math.max(ttl - 10, ttl / 2) * 1000 });
    return token;
  }
}
