// The few OCI distribution calls modules need: manifests and blobs by digest (bounded, every byte verified against
// its digest before it is returned), tags, the catalog, and pushes for publishing. How a request is authorized
// (registry-auth.ts), sent and redirected (registry-exchange.ts, registry-redirect.ts) and its answer read
// (registry-answer.ts) live beside it.
import { createHash } from 'node:crypto';
import type { Dispatcher } from 'undici';
import type { Registry } from '@skr-watcher/telemetry';
import { ModuleSourceError } from './errors.js';
import {
  answerFailure,
  header,
  readBounded,
  type Answer,
  type AnsweringRegistry,
} from './registry-answer.js';
import { parseChallenge, RegistryAuth } from './registry-auth.js';
import type { RegistryCredentials } from './registry-config.js';
import { RegistryExchange, type RegistryOperation, type RequestOptions } from './registry-exchange.js';

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
/** Bound of a manifest, a tag list or a catalog page (descriptors and blobs have their own). */
const SMALL_BODY_BYTES = 4 * 1024 * 1024;

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

/** A client for one registry host; its requests answer one auth challenge each (see RegistryAuth). */
export class RegistryClient {
  readonly host: string;
  readonly insecure: boolean;
  /** Requests sent, by operation (what the counter counts, for tests and benchmarks without a registry). */
  readonly sent: Record<RegistryOperation, number>;
  private readonly exchange: RegistryExchange;
  private readonly auth: RegistryAuth;
  private readonly registry: AnsweringRegistry;

  constructor(options: RegistryClientOptions) {
    this.host = options.host;
    this.insecure = options.insecure ?? false;
    this.exchange = new RegistryExchange({
      timeoutMs: options.timeoutMs ?? 30_000,
      redirectHosts: options.redirectHosts,
      ca: options.ca,
      metrics: options.metrics,
      dispatcher: options.dispatcher,
    });
    this.sent = this.exchange.sent;
    this.auth = new RegistryAuth({
      host: this.host,
      credentials: options.credentials,
      exchange: this.exchange,
    });
    this.registry = { host: this.host, hasCredentials: options.credentials !== undefined };
  }

  get baseUrl(): string {
    return `${this.insecure ? 'http' : 'https'}://${this.host}`;
  }

  async close(): Promise<void> {
    await this.exchange.close();
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

  /** Sends one request, answering auth challenges once; the caller reads or dumps the body. */
  private async send(
    operation: RegistryOperation,
    repository: string,
    actions: string,
    method: Dispatcher.HttpMethod,
    path: string,
    options: Omit<RequestOptions, 'authorization'>,
  ): Promise<Answer> {
    const scope = repository ? `repository:${repository}:${actions}` : 'registry:catalog:*';
    let authorization = await this.auth.authorizationFor(scope);
    for (let attempt = 0; ; attempt++) {
      const answer = await this.exchange.request(operation, method, `${this.baseUrl}${path}`, {
        ...options,
        authorization,
      });
      if (answer.status !== 401 || attempt > 0) return answer;
      const challenge = parseChallenge(header(answer, 'www-authenticate'));
      await answer.body.dump();
      authorization = await this.auth.answerChallenge(challenge, scope);
      if (authorization === undefined) return answer; // nothing else to try: the caller reports the 401
    }
  }

  private readBounded(answer: Answer, maxBytes: number, what: string): Promise<Buffer> {
    return readBounded(answer, maxBytes, what, this.host);
  }

  private failure(answer: Answer, what: string): Promise<ModuleSourceError> {
    return answerFailure(answer, what, this.registry);
  }
}
