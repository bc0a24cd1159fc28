// The caller's KCP: their kubeconfig and context (kubectl's rules), so every request carries their identity and
// RBAC decides what they may see and do. Every request names what it does, so a refusal reads as one clear line.
import {
  ApiException,
  AuthenticationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { GROUP, KINDS } from '@skr-watcher/api';
import { callerIdentity, isUnreachable } from '@skr-watcher/kube';

/** A failure the plugin explains in one line; exit code 1. */
export class PluginError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'PluginError';
  }
}

/** The API server refused the caller (HTTP 403): what they tried is in the message. */
export class RefusedError extends PluginError {
  override name = 'RefusedError';
}

export interface ConnectionOptions {
  kubeconfig?: string;
  context?: string;
  namespace: string;
}

/** What one request does, in RBAC's words: `patch kymas`, `list manifests`. */
export interface RequestIntent {
  verb: string;
  resource: string;
  /** The object, for a 404 that means "no such Kyma" rather than a failure. */
  name?: string;
}

export type KymaKind = keyof typeof KINDS;

export interface Kcp {
  readonly namespace: string;
  /** The API server's URL, for messages. */
  readonly server: string;
  readonly core: CoreV1Api;
  readonly custom: CustomObjectsApi;
  readonly auth: AuthenticationV1Api;
  /** Runs `call`; a failure becomes a PluginError that says what was tried and why it failed, in one line. */
  request<T>(intent: RequestIntent, call: () => Promise<T>): Promise<T>;
  /** Custom objects of one of the project's kinds in the namespace (all pages). */
  list(kind: KymaKind, labelSelector?: string): Promise<unknown[]>;
  get(kind: KymaKind, name: string): Promise<unknown>;
  /** JSON merge patch of one object (a `null` removes a key). */
  mergePatch(kind: KymaKind, name: string, body: object): Promise<unknown>;
}

const mergePatchHeader = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** kubectl's order: --kubeconfig, else $KUBECONFIG, else ~/.kube/config (else in-cluster); then --context. */
export function loadKubeConfig(options: Pick<ConnectionOptions, 'kubeconfig' | 'context'>): KubeConfig {
  const config = new KubeConfig();
  try {
    if (options.kubeconfig) config.loadFromFile(options.kubeconfig);
    else config.loadFromDefault();
  } catch (error) {
    throw new PluginError(
      `cannot load the kubeconfig ${options.kubeconfig ?? '($KUBECONFIG, else ~/.kube/config)'}: ${messageOf(error)}`,
      { cause: error },
    );
  }
  if (options.context) {
    if (!config.getContextObject(options.context)) {
      const known = config.getContexts().map((context) => context.name);
      throw new PluginError(
        `context "${options.context}" is not in the kubeconfig (it has: ${known.join(', ') || 'none'})`,
      );
    }
    config.setCurrentContext(options.context);
  }
  if (!config.getCurrentCluster()) {
    throw new PluginError(
      'the kubeconfig names no cluster for its current context; pass --kubeconfig or --context',
    );
  }
  return config;
}

export function connect(options: ConnectionOptions): Kcp {
  const config = loadKubeConfig(options);
  const server = config.getCurrentCluster()?.server ?? '(unknown server)';
  const { namespace } = options;
  const core = config.makeApiClient(CoreV1Api);
  const custom = config.makeApiClient(CustomObjectsApi);
  const auth = config.makeApiClient(AuthenticationV1Api);
  const ref = (kind: KymaKind) => ({
    group: GROUP,
    version: KINDS[kind].version,
    plural: KINDS[kind].plural,
  });

  async function request<T>(intent: RequestIntent, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      throw failure(intent, namespace, server, error);
    }
  }

  return {
    namespace,
    server,
    core,
    custom,
    auth,
    request,
    async list(kind, labelSelector) {
      const items: unknown[] = [];
      let continueToken: string | undefined;
      do {
        const page = (await request({ verb: 'list', resource: KINDS[kind].plural }, () =>
          custom.listNamespacedCustomObject({
            ...ref(kind),
            namespace,
            limit: 500,
            ...(continueToken ? { _continue: continueToken } : {}),
            ...(labelSelector ? { labelSelector } : {}),
          }),
        )) as { items?: unknown[]; metadata?: { _continue?: string; continue?: string } };
        items.push(...(page.items ?? []));
        continueToken = page.metadata?._continue ?? page.metadata?.continue;
      } while (continueToken);
      return items;
    },
    get(kind, name) {
      return request({ verb: 'get', resource: KINDS[kind].plural, name }, () =>
        custom.getNamespacedCustomObject({ ...ref(kind), namespace, name }),
      );
    },
    mergePatch(kind, name, body) {
      return request({ verb: 'patch', resource: KINDS[kind].plural, name }, () =>
        custom.patchNamespacedCustomObject({ ...ref(kind), namespace, name, body }, mergePatchHeader),
      );
    },
  };
}

/** The one line a failed request is shown as. */
function failure(intent: RequestIntent, namespace: string, server: string, error: unknown): PluginError {
  const code = error instanceof ApiException ? error.code : undefined;
  const detail = statusMessage(error);
  if (code === 403) {
    return new RefusedError(`you may not ${intent.verb} ${intent.resource} in ${namespace}: ${detail}`, {
      cause: error,
    });
  }
  if (code === 404 && intent.name) {
    return new PluginError(`${singular(intent.resource)} "${intent.name}" not found in ${namespace}`, {
      cause: error,
    });
  }
  if (code === 401) {
    return new PluginError(
      `the API server ${server} did not accept your credentials (HTTP 401): check --kubeconfig and --context`,
      { cause: error },
    );
  }
  if (code === undefined && isUnreachable(error)) {
    return new PluginError(`cannot reach the API server ${server}: ${messageOf(error)}`, { cause: error });
  }
  const what = `${intent.verb} ${intent.resource}${intent.name ? ` ${intent.name}` : ''} in ${namespace}`;
  return new PluginError(`${what} failed${code === undefined ? '' : ` (HTTP ${code})`}: ${detail}`, {
    cause: error,
  });
}

function singular(resource: string): string {
  return resource.endsWith('s') ? resource.slice(0, -1) : resource;
}

/** The API server's Status message of an ApiException, else the error's own message (first line). */
export function statusMessage(error: unknown): string {
  if (error instanceof ApiException) {
    const body: unknown = error.body;
    if (typeof body === 'string') {
      try {
        const parsed = JSON.parse(body) as { message?: unknown };
        if (typeof parsed.message === 'string') return parsed.message;
      } catch {
        if (body.trim().length > 0) return body.trim().split('\n')[0]!.slice(0, 300);
      }
    } else if (typeof body === 'object' && body !== null) {
      const message = (body as { message?: unknown }).message;
      if (typeof message === 'string') return message;
    }
  }
  return messageOf(error);
}

export function messageOf(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  const code = error instanceof Error ? (error as { code?: unknown }).code : undefined;
  const cause = error instanceof Error && error.cause instanceof Error ? `: ${messageOf(error.cause)}` : '';
  const first = text.split('\n')[0] ?? text;
  return `${first}${typeof code === 'string' && !first.includes(code) ? ` (${code})` : ''}${cause}`;
}

/** The caller as the API server sees them (SelfSubjectReview): the name written into annotations, Events, audit. */
export async function whoAmI(kcp: Kcp): Promise<{ username: string; groups: string[] }> {
  return kcp.request({ verb: 'create', resource: 'selfsubjectreviews' }, () => callerIdentity(kcp.auth));
}
