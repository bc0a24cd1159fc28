// The webhook watches its own ValidatingWebhookConfiguration in the SKR: an SKR user who deletes
// it or points it elsewhere silences the webhook, and the API server never calls a webhook about webhook
// configurations, so nothing else would tell KCP before its next requeue. When the configuration goes, or a writer
// other than the agent's registration changed it, the webhook asks KCP for a resync; the agent's pass applies it
// again and says so in the Kyma's SKRWebhook condition. One watch of one object by name: the ClusterRole the agent
// installs grants get/list/watch of that name only.
import { readFile } from 'node:fs/promises';
import { request, type RequestOptions } from 'node:https';
import type { IncomingMessage } from 'node:http';
import { SKR_WEBHOOK_REGISTRATION, backoffDelay } from '@skr-watcher/api';
import type { Logger } from '@skr-watcher/telemetry';

const COLLECTION = '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations';
/** The API server ends a watch after this; the loop lists and watches again (a list of one object is cheap). */
const WATCH_SECONDS = 290;
/** A list that takes longer is cut and tried again. */
const LIST_TIMEOUT_MS = 10_000;
/** Where the credentials of a Pod's ServiceAccount are mounted. */
export const IN_CLUSTER = {
  tokenFile: '/var/run/secrets/kubernetes.io/serviceaccount/token',
  caFile: '/var/run/secrets/kubernetes.io/serviceaccount/ca.crt',
} as const;

export interface ConfigurationWatchOptions {
  /** `https://host:port` of the SKR API server. */
  apiServer: URL;
  /** Bearer token, re-read for every request (kubelet rotates projected tokens). */
  tokenFile: string;
  /** CA of the API server's serving certificate. */
  caFile: string;
  /** Name of the configuration (the registration's: `skr-webhook`). */
  name: string;
  logger: Logger;
  /** The configuration went, was changed by someone else, or can no longer be read. */
  onTampered(why: string): void;
  /** First retry delay after a failure; doubles up to 30 s. */
  retryInitialMs?: number;
}

interface ManagedFieldsEntry {
  manager?: string;
  time?: string;
}
interface ConfigurationObject {
  metadata?: { resourceVersion?: string; managedFields?: ManagedFieldsEntry[] };
}
interface WatchLine {
  type?: string;
  object?: ConfigurationObject & { code?: number; message?: string };
}

class ApiError extends Error {
  constructor(
    message: string,
    readonly statusCode: number,
  ) {
    super(message);
  }
}

/**
 * Who wrote the object last, as its managedFields say (second resolution): the managers whose entry carries the
 * newest time. Empty when managedFields were stripped.
 */
export function lastWriters(object: ConfigurationObject): string[] {
  const entries = object.metadata?.managedFields ?? [];
  const times = entries.map((entry) => Date.parse(entry.time ?? '')).filter((time) => !Number.isNaN(time));
  if (times.length === 0) return [];
  const newest = Math.max(...times);
  return entries
    .filter((entry) => Date.parse(entry.time ?? '') === newest)
    .map((entry) => entry.manager ?? '');
}

/** Why the object as seen needs the agent's attention, or undefined when the registration wrote it last. */
export function tamperedBecause(object: ConfigurationObject): string | undefined {
  const writers = lastWriters(object);
  if (writers.length === 0) return 'its managedFields were removed';
  const others = writers.filter((writer) => writer !== SKR_WEBHOOK_REGISTRATION.fieldManager);
  // A tie with the registration's own entry counts too: a foreign write and the repair in the same second.
  return others.length > 0 ? `changed by ${others.join(', ')}` : undefined;
}

export class ConfigurationWatch {
  private closed = false;
  private current: IncomingMessage | undefined;
  private pending: ReturnType<typeof request> | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private wakeRetry: (() => void) | undefined;
  /** What the last list or event showed: the object's resourceVersion, 'absent', or 'unreadable'. */
  private seen: string | undefined;
  private running: Promise<void> | undefined;

  constructor(private readonly options: ConfigurationWatchOptions) {}

  start(): void {
    this.running ??= this.loop();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.pending?.destroy();
    this.current?.destroy();
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.wakeRetry?.();
    await this.running;
  }

  private async loop(): Promise<void> {
    let failures = 0;
    while (!this.closed) {
      try {
        const resourceVersion = await this.list();
        failures = 0;
        await this.watch(resourceVersion);
      } catch (error) {
        if (this.closed) return;
        const statusCode = error instanceof ApiError ? error.statusCode : undefined;
        if ((statusCode === 401 || statusCode === 403) && this.seen !== 'unreadable') {
          // Its ClusterRole or binding went (or was never installed): the agent's pass puts them back.
          this.seen = 'unreadable';
          this.tampered(`the webhook may no longer read it (HTTP ${statusCode})`);
        }
        failures++;
        const delay = backoffDelay(failures, this.options.retryInitialMs ?? 1_000, 30_000);
        this.options.logger.warn(
          { err: error, configuration: this.options.name, retryInMs: Math.round(delay) },
          'watch of the webhook configuration failed',
        );
        await new Promise<void>((resolve) => {
          this.wakeRetry = resolve;
          this.retryTimer = setTimeout(resolve, delay);
        });
      }
    }
  }

  private tampered(why: string): void {
    this.options.logger.warn(
      { configuration: this.options.name, why },
      'webhook configuration changed outside the agent; asking KCP to reconcile',
    );
    this.options.onTampered(`ValidatingWebhookConfiguration ${this.options.name}: ${why}`);
  }

  private observe(object: ConfigurationObject | undefined): void {
    if (!object) {
      if (this.seen !== 'absent') this.tampered('deleted');
      this.seen = 'absent';
      return;
    }
    const resourceVersion = object.metadata?.resourceVersion ?? '';
    if (resourceVersion === this.seen) return;
    this.seen = resourceVersion;
    const why = tamperedBecause(object);
    if (why) this.tampered(why);
  }

  private async list(): Promise<string> {
    const response = await this.get(`${COLLECTION}?fieldSelector=${this.selector()}`, LIST_TIMEOUT_MS);
    const body = await readAll(response, 4 * 1024 * 1024);
    const list = JSON.parse(body) as {
      items?: ConfigurationObject[];
      metadata?: { resourceVersion?: string };
    };
    this.observe(list.items?.[0]);
    return list.metadata?.resourceVersion ?? '';
  }

  private async watch(resourceVersion: string): Promise<void> {
    const query =
      `fieldSelector=${this.selector()}&watch=true&allowWatchBookmarks=true` +
      `&timeoutSeconds=${WATCH_SECONDS}&resourceVersion=${encodeURIComponent(resourceVersion)}`;
    const response = await this.get(`${COLLECTION}?${query}`, (WATCH_SECONDS + 30) * 1000);
    this.current = response;
    let buffered = '';
    response.setEncoding('utf8');
    for await (const chunk of response as AsyncIterable<string>) {
      buffered += chunk;
      let newline: number;
      while ((newline = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, newline);
        buffered = buffered.slice(newline + 1);
        if (line.trim() === '') continue;
        const event = JSON.parse(line) as WatchLine;
        switch (event.type) {
          case 'ADDED':
          case 'MODIFIED':
            this.observe(event.object);
            break;
          case 'DELETED':
            this.observe(undefined);
            break;
          case 'ERROR':
            // 410 Gone and the like: list again.
            response.destroy();
            return;
        }
      }
      if (buffered.length > 4 * 1024 * 1024) throw new Error('watch line above 4 MiB');
    }
    this.current = undefined;
  }

  private selector(): string {
    return encodeURIComponent(`metadata.name=${this.options.name}`);
  }

  private async get(path: string, timeoutMs: number): Promise<IncomingMessage> {
    const [token, ca] = await Promise.all([
      readFile(this.options.tokenFile, 'utf8'),
      readFile(this.options.caFile, 'utf8'),
    ]);
    const url = this.options.apiServer;
    const requestOptions: RequestOptions = {
      host: url.hostname.replace(/^\[|\]$/g, ''),
      port: url.port || 443,
      path,
      method: 'GET',
      ca,
      headers: { authorization: `Bearer ${token.trim()}`, accept: 'application/json' },
      timeout: timeoutMs,
    };
    return new Promise((resolve, reject) => {
      const req = request(requestOptions, (response) => {
        this.pending = undefined;
        if (response.statusCode !== 200) {
          void readAll(response, 64 * 1024)
            .catch(() => '')
            .then((body) =>
              reject(
                new ApiError(
                  `GET ${path}: HTTP ${response.statusCode} ${body.slice(0, 300)}`,
                  response.statusCode ?? 0,
                ),
              ),
            );
          return;
        }
        resolve(response);
      });
      this.pending = req;
      req.on('timeout', () => req.destroy(new Error(`GET ${path}: no answer within ${timeoutMs} ms`)));
      req.on('error', reject);
      req.end();
    });
  }
}

async function readAll(response: IncomingMessage, maxBytes: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of response as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) {
      response.destroy();
      throw new Error(`answer above ${maxBytes} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
