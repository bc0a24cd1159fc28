// The few OCI distribution calls modules need, over undici: manifests and blobs by digest (bounded, every byte
// verified against its digest before it is returned), tags, the catalog, and pushes for publishing. Auth:
// anonymous, Basic, and the Docker token flow (401 + WWW-Authenticate: Bearer realm,service,scope → token).
import { createHash } from 'node:crypto';
import { Agent, type Dispatcher } from 'undici';
import { Counter, type Registry } from '@skr-watcher/telemetry';
import { registeredMetric } from '@skr-watcher/telemetry';
import { ModuleSourceError, type ModuleSourceReason } from './errors.js';
import type { RegistryCredentials } from './registry-config.js';

/** Operations as counted in `skr_agent_oci_registry_requests_total{operation}` (a bounded set). */
export type RegistryOperation = 'token' | 'manifest' | 'blob' | 'tags' | 'catalog' | 'push';

export interface RegistryClientOptions {
  /** host[:port] */
  host: string;
  /** Plain HTTP instead of HTTPS. */
  insecure?: boolean;
  credentials?: RegistryCredentials;
  /** Extra CA certificates (PEM) for HTTPS registries with a private CA. */
  ca?: string;
  /**
   * Hosts a redirect may lead to besides the host asked (e.g. the blob storage behind a registry); none by default,
   * so a registry cannot send the agent to an address of its choosing.
   */
  redirectHosts?: readonly string[];
  /** Bound of each request from sending to the last byte (default 30 s). */
  timeoutMs?: number;
  /** Where `skr_agent_oci_registry_requests_total` is registered (optional). */
  metrics?: Registry;
  /** A dispatcher of the caller's (tests, proxies); default: a pool of this client's own. */
  dispatcher?: Dispatcher;
}

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
}

export interface FetchedManifest {
  digest: string;
  mediaType: string;
  bytes: Buffer;
}

const DIGEST = /^sha256:[a-f0-9]{64}$/;
/** Bound of a manifest, a token answer, a tag list or a catalog page (descriptors and blobs have their own). */
const SMALL_BODY_BYTES = 4 * 1024 * 1024;
const TOKEN_TTL_DEFAULT_S = 60;
const MAX_REDIRECTS = 3;

export const MANIFEST_MEDIA_TYPES = [
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.docker.distribution.manifest.v2+json',
];

export function sha256Digest(bytes: Buffer | string): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

export function isDigest(value: string): boolean {
  return DIGEST.test(value);
}

interface Challenge {
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

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Dispatcher.ResponseData['body'];
}

function header(answer: Answer, name: string): string | undefined {
  const value = answer.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function classifyNetworkError(error: unknown): { reason: ModuleSourceReason; text: string } {
  const code = (error as { code?: string }).code ?? '';
  const name = (error as Error).name ?? '';
  if (
    name === 'TimeoutError' ||
    name === 'AbortError' ||
    code === 'UND_ERR_HEADERS_TIMEOUT' ||
    code === 'UND_ERR_BODY_TIMEOUT' ||
    code === 'UND_ERR_CONNECT_TIMEOUT' ||
    code === 'UND_ERR_ABORTED'
  ) {
    return { reason: 'RegistryTimeout', text: 'did not answer in time' };
  }
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  const detail = cause?.code ?? code ?? '';
  return {
    reason: 'RegistryUnreachable',
    text: `is unreachable (${detail || (cause?.message ?? (error as Error).message)})`,
  };
}

/**
 * A client for one registry host. Tokens are cached per scope until they expire; after one Bearer challenge the
 * client asks for tokens of new scopes up front (one round trip less per repository).
 */
export class RegistryClient {
  readonly host: string;
  readonly insecure: boolean;
  private readonly credentials: RegistryCredentials | undefined;
  private readonly timeoutMs: number;
  private readonly redirectHosts: ReadonlySet<string>;
  private readonly dispatcher: Dispatcher;
  private readonly ownDispatcher: boolean;
  private readonly requests: Counter<'operation' | 'code'> | undefined;
  private readonly tokens = new Map<string, { token: string; expiresAt: number }>();
  private readonly tokenFetches = new Map<string, Promise<string>>();
  private bearerRealm: { realm: string; service: string | undefined } | undefined;
  /** Requests sent, by operation (what the counter counts, for tests and benchmarks without a registry). */
  readonly sent: Record<RegistryOperation, number> = {
    token: 0,
    manifest: 0,
    blob: 0,
    tags: 0,
    catalog: 0,
    push: 0,
  };

  constructor(options: RegistryClientOptions) {
    this.host = options.host;
    this.insecure = options.insecure ?? false;
    this.credentials = options.credentials;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.redirectHosts = new Set(options.redirectHosts ?? []);
    this.ownDispatcher = options.dispatcher === undefined;
    this.dispatcher =
      options.dispatcher ??
      new Agent({
        connections: 8,
        connectTimeout: Math.min(this.timeoutMs, 10_000),
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
        ...(options.ca ? { connect: { ca: options.ca } } : {}),
      });
    this.requests = options.metrics
      ? registeredMetric(
          options.metrics,
          'skr_agent_oci_registry_requests_total',
          () =>
            new Counter({
              name: 'skr_agent_oci_registry_requests_total',
              help: 'Requests sent to OCI registries, by operation and HTTP status (or error).',
              labelNames: ['operation', 'code'] as const,
              registers: [options.metrics!],
            }),
        )
      : undefined;
  }

  get baseUrl(): string {
    return `${this.insecure ? 'http' : 'https'}://${this.host}`;
  }

  async close(): Promise<void> {
    if (this.ownDispatcher) await this.dispatcher.close();
  }

  /** The manifest `reference` (tag or digest) of `repository`, checked against its digest. */
  async manifest(repository: string, reference: string): Promise<FetchedManifest> {
    const path = `/v2/${repository}/manifests/${reference}`;
    const answer = await this.send('manifest', repository, 'pull', 'GET', path, {
      accept: MANIFEST_MEDIA_TYPES.join(', '),
    });
    const what = `manifest ${repository}:${reference}`;
    if (answer.status !== 200) throw await this.failure(answer, what);
    const bytes = await this.readBounded(answer, SMALL_BODY_BYTES, what);
    const digest = sha256Digest(bytes);
    const claimed = isDigest(reference) ? reference : header(answer, 'docker-content-digest');
    if (claimed !== undefined && claimed !== digest) {
      throw new ModuleSourceError(
        'DigestMismatch',
        `${what} at ${this.host}: the registry sent bytes with digest ${digest}, not ${claimed}`,
      );
    }
    return { digest, mediaType: header(answer, 'content-type') ?? '', bytes };
  }

  /**
   * The blob `digest` of `repository`, at most `maxBytes`, returned only if its bytes have that digest (and the
   * size a descriptor gave, when given).
   */
  async blob(
    repository: string,
    digest: string,
    bounds: { maxBytes: number; size?: number },
  ): Promise<Buffer> {
    const what = `blob ${digest} of ${repository}`;
    if (!isDigest(digest)) {
      throw new ModuleSourceError('MalformedDescriptor', `${what}: not a sha256 digest`);
    }
    if (bounds.size !== undefined && bounds.size > bounds.maxBytes) {
      throw new ModuleSourceError(
        'TooLarge',
        `${what} is ${bounds.size} bytes, more than the bound of ${bounds.maxBytes} bytes`,
      );
    }
    const answer = await this.send(
      'blob',
      repository,
      'pull',
      'GET',
      `/v2/${repository}/blobs/${digest}`,
      {},
    );
    if (answer.status !== 200) throw await this.failure(answer, what);
    const bytes = await this.readBounded(answer, bounds.maxBytes, what);
    const actual = sha256Digest(bytes);
    if (actual !== digest) {
      throw new ModuleSourceError(
        'DigestMismatch',
        `${what} at ${this.host}: the bytes received have digest ${actual}; the registry's copy is damaged or was replaced`,
      );
    }
    if (bounds.size !== undefined && bytes.length !== bounds.size) {
      throw new ModuleSourceError(
        'DigestMismatch',
        `${what}: ${bytes.length} bytes, the descriptor says ${bounds.size}`,
      );
    }
    return bytes;
  }

  /** Tags of `repository` (one page; test and inspection use). */
  async tags(repository: string): Promise<string[]> {
    const answer = await this.send(
      'tags',
      repository,
      'pull',
      'GET',
      `/v2/${repository}/tags/list?n=1000`,
      {},
    );
    if (answer.status === 404) {
      await answer.body.dump();
      return [];
    }
    if (answer.status !== 200) throw await this.failure(answer, `tags of ${repository}`);
    const body = JSON.parse(
      (await this.readBounded(answer, SMALL_BODY_BYTES, `tags of ${repository}`)).toString(),
    ) as { tags?: unknown };
    return Array.isArray(body.tags) ? body.tags.filter((t): t is string => typeof t === 'string') : [];
  }

  /** Repository names the registry lists in its catalog (one page of up to 10,000). */
  async catalog(): Promise<string[]> {
    const answer = await this.send('catalog', '', 'catalog', 'GET', '/v2/_catalog?n=10000', {});
    if (answer.status !== 200) throw await this.failure(answer, 'catalog');
    const body = JSON.parse((await this.readBounded(answer, SMALL_BODY_BYTES, 'catalog')).toString()) as {
      repositories?: unknown;
    };
    return Array.isArray(body.repositories)
      ? body.repositories.filter((r): r is string => typeof r === 'string')
      : [];
  }

  /** Uploads `bytes` as a blob of `repository` unless the registry has it already; returns its descriptor. */
  async pushBlob(repository: string, bytes: Buffer, mediaType: string): Promise<Descriptor> {
    const digest = sha256Digest(bytes);
    const head = await this.send(
      'push',
      repository,
      'pull,push',
      'HEAD',
      `/v2/${repository}/blobs/${digest}`,
      {},
    );
    await head.body.dump();
    if (head.status !== 200) {
      const path = `/v2/${repository}/blobs/uploads/?digest=${digest}`;
      const answer = await this.send('push', repository, 'pull,push', 'POST', path, {
        body: bytes,
        contentType: 'application/octet-stream',
      });
      if (answer.status !== 201)
        throw await this.failure(answer, `upload of blob ${digest} to ${repository}`);
      await answer.body.dump();
    }
    return { mediaType, digest, size: bytes.length };
  }

  /** Puts a manifest under `tag`; returns its descriptor. */
  async pushManifest(repository: string, tag: string, bytes: Buffer, mediaType: string): Promise<Descriptor> {
    const answer = await this.send(
      'push',
      repository,
      'pull,push',
      'PUT',
      `/v2/${repository}/manifests/${tag}`,
      {
        body: bytes,
        contentType: mediaType,
      },
    );
    if (answer.status !== 201 && answer.status !== 200) {
      throw await this.failure(answer, `manifest ${repository}:${tag}`);
    }
    await answer.body.dump();
    return { mediaType, digest: sha256Digest(bytes), size: bytes.length };
  }

  private count(operation: RegistryOperation, code: string): void {
    this.sent[operation]++;
    this.requests?.inc({ operation, code });
  }

  /** Sends one request, answering auth challenges once; the caller reads or dumps the body. */
  private async send(
    operation: RegistryOperation,
    repository: string,
    actions: string,
    method: Dispatcher.HttpMethod,
    path: string,
    options: { accept?: string; body?: Buffer; contentType?: string },
  ): Promise<Answer> {
    const scope = repository ? `repository:${repository}:${actions}` : 'registry:catalog:*';
    let authorization = await this.authorizationFor(scope);
    for (let attempt = 0; ; attempt++) {
      const answer = await this.request(operation, method, `${this.baseUrl}${path}`, {
        ...options,
        authorization,
      });
      if (answer.status !== 401 || attempt > 0) return answer;
      const challenge = parseChallenge(header(answer, 'www-authenticate'));
      await answer.body.dump();
      if (challenge?.scheme === 'bearer' && challenge.params['realm']) {
        this.bearerRealm = { realm: challenge.params['realm'], service: challenge.params['service'] };
        this.tokens.delete(scope);
        authorization = `Bearer ${await this.token(challenge.params['scope'] ?? scope)}`;
      } else if (challenge?.scheme === 'basic' && this.credentials?.kind === 'basic') {
        authorization = basicAuthorization(this.credentials);
      } else {
        return answer; // nothing else to try: the caller reports the 401
      }
    }
  }

  private async authorizationFor(scope: string): Promise<string | undefined> {
    if (this.credentials?.kind === 'bearer') return `Bearer ${this.credentials.token}`;
    if (!this.bearerRealm) return undefined;
    return `Bearer ${await this.token(scope)}`;
  }

  /** A token for `scope` from the realm last seen: cached, one fetch per scope at a time. */
  private async token(scope: string): Promise<string> {
    const cached = this.tokens.get(scope);
    if (cached && cached.expiresAt > Date.now()) return cached.token;
    const running = this.tokenFetches.get(scope);
    if (running) return running;
    const fetching = this.fetchToken(scope).finally(() => this.tokenFetches.delete(scope));
    this.tokenFetches.set(scope, fetching);
    return fetching;
  }

  private async fetchToken(scope: string): Promise<string> {
    const { realm, service } = this.bearerRealm!;
    const url = new URL(realm);
    if (service) url.searchParams.set('service', service);
    url.searchParams.set('scope', scope);
    const authorization =
      this.credentials?.kind === 'basic' ? basicAuthorization(this.credentials) : undefined;
    const answer = await this.request('token', 'GET', url.toString(), { authorization });
    if (answer.status !== 200) {
      const failure = await this.failure(answer, `token for ${scope}`);
      throw answer.status === 401 || answer.status === 403
        ? new ModuleSourceError(
            'Unauthorized',
            `${this.host} refused ${this.credentials ? 'the credentials' : 'anonymous access'} (token for ${scope})`,
            { status: answer.status, cause: failure },
          )
        : failure;
    }
    const body = JSON.parse((await this.readBounded(answer, 64 * 1024, 'token')).toString()) as {
      token?: unknown;
      access_token?: unknown;
      expires_in?: unknown;
    };
    const token = typeof body.token === 'string' ? body.token : body.access_token;
    if (typeof token !== 'string' || token === '') {
      throw new ModuleSourceError(
        'RegistryError',
        `the token service of ${this.host} answered without a token`,
      );
    }
    const ttl =
      typeof body.expires_in === 'number' && body.expires_in > 0 ? body.expires_in : TOKEN_TTL_DEFAULT_S;
    // Renew a little early: a token that expires in flight costs a 401 and a retry.
    this.tokens.set(scope, { token, expiresAt: Date.now() + Math.max(ttl - 10, ttl / 2) * 1000 });
    return token;
  }

  /** One HTTP exchange (following redirects, without credentials to another origin), counted. */
  private async request(
    operation: RegistryOperation,
    method: Dispatcher.HttpMethod,
    url: string,
    options: { accept?: string; body?: Buffer; contentType?: string; authorization?: string | undefined },
  ): Promise<Answer> {
    let target = new URL(url);
    const origin = target.origin;
    for (let hop = 0; ; hop++) {
      const headers: Record<string, string> = {};
      if (options.accept) headers['accept'] = options.accept;
      if (options.contentType) headers['content-type'] = options.contentType;
      if (options.authorization && target.origin === origin) headers['authorization'] = options.authorization;
      let answer: Answer;
      try {
        const response = await this.dispatcher.request({
          origin: target.origin,
          path: `${target.pathname}${target.search}`,
          method,
          headers,
          ...(options.body ? { body: options.body } : {}),
          signal: AbortSignal.timeout(this.timeoutMs),
        });
        answer = { status: response.statusCode, headers: response.headers, body: response.body };
      } catch (error) {
        const { reason, text } = classifyNetworkError(error);
        this.count(operation, reason === 'RegistryTimeout' ? 'timeout' : 'error');
        throw new ModuleSourceError(reason, `registry ${target.host} ${text}`, { cause: error });
      }
      this.count(operation, String(answer.status));
      const location = header(answer, 'location');
      if (
        answer.status >= 300 &&
        answer.status < 400 &&
        location &&
        hop < MAX_REDIRECTS &&
        method === 'GET'
      ) {
        await answer.body.dump();
        const next = new URL(location, target);
        if (next.host !== new URL(url).host && !this.redirectHosts.has(next.host))
          throw new ModuleSourceError(
            'RegistryError',
            `registry ${target.host} redirected ${operation} to ${next.host}, which is not the registry's host or an allowed redirect host`,
            { status: answer.status },
          );
        target = next;
        continue;
      }
      return answer;
    }
  }

  /** Reads a body of at most `maxBytes`, giving up as soon as it is known to be larger. */
  private async readBounded(answer: Answer, maxBytes: number, what: string): Promise<Buffer> {
    const length = Number(header(answer, 'content-length'));
    if (Number.isFinite(length) && length > maxBytes) {
      answer.body.destroy();
      throw new ModuleSourceError(
        'TooLarge',
        `${what} is ${length} bytes, more than the bound of ${maxBytes} bytes`,
      );
    }
    const chunks: Buffer[] = [];
    let total = 0;
    try {
      for await (const chunk of answer.body) {
        total += (chunk as Buffer).length;
        if (total > maxBytes) {
          answer.body.destroy();
          throw new ModuleSourceError('TooLarge', `${what} is more than the bound of ${maxBytes} bytes`);
        }
        chunks.push(chunk as Buffer);
      }
    } catch (error) {
      if (error instanceof ModuleSourceError) throw error;
      const { reason, text } = classifyNetworkError(error);
      throw new ModuleSourceError(reason, `registry ${this.host} ${text} while sending ${what}`, {
        cause: error,
      });
    }
    return Buffer.concat(chunks, total);
  }

  /** The error for an answer that is not what was asked for, with the registry's own words when it gave some. */
  private async failure(answer: Answer, what: string): Promise<ModuleSourceError> {
    let detail = '';
    try {
      const text = (await this.readBounded(answer, 16 * 1024, what)).toString();
      const parsed = JSON.parse(text) as { errors?: { code?: string; message?: string }[] };
      detail = (parsed.errors ?? [])
        .map((e) => [e.code, e.message].filter(Boolean).join(' '))
        .filter(Boolean)
        .join('; ');
    } catch {
      // no readable body: the status says enough
    }
    const status = answer.status;
    const reason: ModuleSourceReason =
      status === 404
        ? 'NotFound'
        : status === 401 || status === 403
          ? 'Unauthorized'
          : status === 413
            ? 'TooLarge'
            : 'RegistryError';
    const words =
      status === 404
        ? 'not found'
        : status === 401 || status === 403
          ? `access refused (${status}${this.credentials ? '' : ', no credentials configured'})`
          : `answered ${status}`;
    return new ModuleSourceError(reason, `${what} at ${this.host}: ${words}${detail ? ` (${detail})` : ''}`, {
      status,
    });
  }
}

function basicAuthorization(credentials: { username: string; password: string }): string {
  return `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}`;
}
