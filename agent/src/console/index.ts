// The read-only fleet console (`skr-agent run --console-address`): the fleet overview and one Kyma's page, as
// `kubectl skr status` and `explain` show them, with live updates. Every request, the document, the JSON and the
// stream alike, carries the caller's bearer token and is authorized as kube-rbac-proxy would (access.ts). Loaded
// only when the flag is set (a dynamic import in commands/run.ts), so an agent without it holds none of this.
import { randomBytes } from 'node:crypto';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { KubeConfig } from '@kubernetes/client-node';
import { kubernetesAccessReviewer, type AccessReviewer, type MetricsAccess } from '@skr-watcher/kube';
import {
  closeGracefully,
  createHttpApp,
  listenOn,
  notFound,
  reply,
  replyJson,
  type Logger,
  type RouteRequest,
} from '@skr-watcher/telemetry';
import type { EventStream } from '../event-stream.js';
import { REVIEW_CACHE_ENTRIES, REVIEW_CACHE_MS, accessOf, bearerToken, kymaAccess } from './access.js';
import { kcpFleetSource, type FleetSource } from './fleet-source.js';
import { createLiveFeed, type LiveMessage } from './live.js';
import { consolePage } from './page.js';

export interface ConsoleOptions {
  host?: string;
  port: number;
  /** The KCP namespace of the Kymas (the agent's --namespace). */
  namespace: string;
  /** The agent's KCP client: it reads the fleet and asks the reviews. */
  kubeConfig: KubeConfig;
  events: EventStream;
  logger: Logger;
  /** Defaults to TokenReview + SubjectAccessReview on the KCP, cached REVIEW_CACHE_MS. */
  reviewer?: AccessReviewer;
  source?: FleetSource;
}

export interface ConsoleServer {
  readonly port: number;
  close(): Promise<void>;
}

/** A stream is authorized when it opens; it ends after this so the page reconnects and is authorized again. */
const STREAM_MAX_MS = 5 * 60_000;
/** A comment line this often keeps proxies (and kubectl port-forward) from cutting an idle stream. */
const HEARTBEAT_MS = 15_000;
/** Viewers' streams are cut at shutdown; nothing is owed to them. */
const CLOSE_GRACE_MS = 0;
/** Kubernetes object names: what a Kyma path segment may hold. */
const KYMA_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

const SECURITY_HEADERS = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};

export async function startConsole(options: ConsoleOptions): Promise<ConsoleServer> {
  const { namespace, logger } = options;
  const reviewer =
    options.reviewer ??
    kubernetesAccessReviewer(options.kubeConfig, {
      cacheMs: REVIEW_CACHE_MS,
      cacheEntries: REVIEW_CACHE_ENTRIES,
    });
  const source = options.source ?? kcpFleetSource(options.kubeConfig, namespace);
  const live = createLiveFeed({ kubeConfig: options.kubeConfig, namespace, events: options.events, logger });
  const app = createHttpApp({ methods: ['GET'], headers: SECURITY_HEADERS });

  /** The access of this request to `kyma` (or the namespace); answers 401/403/503 itself and returns false. */
  const admit = async (
    request: RouteRequest,
    response: ServerResponse,
    kyma?: string,
  ): Promise<MetricsAccess | 'failed'> => {
    try {
      return await accessOf(reviewer, bearerToken(request, false), kymaAccess(namespace, kyma));
    } catch (error) {
      logger.warn({ err: error, path: request.path }, 'console could not review a token');
      reply(response, 503, 'the API server could not review the token; try again\n');
      return 'failed';
    }
  };
  const refuse = (response: ServerResponse, access: MetricsAccess, kyma?: string): boolean => {
    if (access === 'unauthenticated') {
      reply(response, 401, 'a bearer token the KCP API server accepts is required\n', undefined, {
        'www-authenticate': 'Bearer realm="skr-watcher console"',
      });
      return true;
    }
    if (access === 'forbidden') {
      reply(response, 403, `forbidden: get kymas${kyma ? ` ${kyma}` : ''} in ${namespace} is not allowed\n`);
      return true;
    }
    return false;
  };
  const kymaParam = (request: RouteRequest, response: ServerResponse): string | undefined => {
    const name = request.params['name'] ?? '';
    if (KYMA_NAME.test(name)) return name;
    notFound(request, response);
    return undefined;
  };

  // The document: 200 with a token allowed to see it, else the same document as a sign-in page (no data in either).
  const page = async (request: RouteRequest, response: ServerResponse, kyma?: string) => {
    let access: MetricsAccess;
    try {
      access = await accessOf(reviewer, bearerToken(request, true), kymaAccess(namespace, kyma));
    } catch (error) {
      logger.warn({ err: error, path: request.path }, 'console could not review a token');
      access = 'unauthenticated';
    }
    const nonce = randomBytes(16).toString('base64');
    reply(
      response,
      access === 'allowed' ? 200 : access === 'forbidden' ? 403 : 401,
      consolePage({ nonce, access, namespace }),
      'text/html; charset=utf-8',
      {
        'content-security-policy': `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'nonce-${nonce}'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'`,
      },
    );
  };
  app.get('/', (request, response) => page(request, response));
  app.get('/kymas/:name', async (request, response) => {
    const kyma = kymaParam(request, response);
    if (kyma) await page(request, response, kyma);
  });

  app.get('/api/fleet', async (request, response) => {
    const access = await admit(request, response);
    if (access === 'failed' || refuse(response, access)) return;
    try {
      replyJson(response, 200, await source.fleet());
    } catch (error) {
      logger.warn({ err: error }, 'console could not read the fleet');
      reply(response, 502, 'the KCP could not be read; see the agent log\n');
    }
  });
  app.get('/api/kymas/:name', async (request, response) => {
    const kyma = kymaParam(request, response);
    if (!kyma) return;
    const access = await admit(request, response, kyma);
    if (access === 'failed' || refuse(response, access, kyma)) return;
    try {
      const data = await source.kyma(kyma, new Date());
      if (data) replyJson(response, 200, data);
      else reply(response, 404, `Kyma ${namespace}/${kyma} not found\n`);
    } catch (error) {
      logger.warn({ err: error, kyma }, 'console could not read a Kyma');
      reply(response, 502, 'the KCP could not be read; see the agent log\n');
    }
  });

  // Server-sent events: `callback` (an accepted callback) and `change` (Kymas whose object or Manifests changed).
  app.get('/api/stream', async (request, response) => {
    const wanted = request.query.get('kyma') ?? undefined;
    if (wanted !== undefined && !KYMA_NAME.test(wanted)) {
      reply(response, 400, 'kyma: not a Kyma name\n');
      return;
    }
    const access = await admit(request, response, wanted);
    if (access === 'failed' || refuse(response, access, wanted)) return;
    response.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', connection: 'keep-alive' });
    response.write(': connected\n\n');
    const kymaOfEvent = (kyma: string) => kyma.slice(kyma.indexOf('/') + 1);
    const unsubscribe = live.subscribe((message: LiveMessage) => {
      if (message.type === 'callback') {
        if (wanted && kymaOfEvent(message.event.kyma) !== wanted) return;
        response.write(`event: callback\ndata: ${JSON.stringify(message.event)}\n\n`);
      } else {
        const kymas = wanted ? message.change.kymas.filter((name) => name === wanted) : message.change.kymas;
        if (kymas.length > 0) response.write(`event: change\ndata: ${JSON.stringify({ kymas })}\n\n`);
      }
    });
    const heartbeat = setInterval(() => response.write(': heartbeat\n\n'), HEARTBEAT_MS);
    const end = setTimeout(() => response.end(), STREAM_MAX_MS);
    response.on('close', () => {
      clearInterval(heartbeat);
      clearTimeout(end);
      unsubscribe();
    });
  });

  const server: Server = createServer(app.listener);
  const port = await listenOn(server, options.host, options.port, 'console');
  logger.info({ consolePort: port, namespace }, 'console serving');
  return {
    port,
    async close() {
      live.close();
      server.closeAllConnections();
      await closeGracefully(server, CLOSE_GRACE_MS);
    },
  };
}
