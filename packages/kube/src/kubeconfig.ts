// SKR kubeconfigs come from KCP Secrets that tenants' tooling writes: they are input, not trusted configuration.
// client-node would run an exec plugin, an auth-provider, or read a token-file (in a cluster, the agent's own
// ServiceAccount token) and send it to the SKR's server; so only inline credentials are accepted, and the
// KubeConfig is built from the checked fields alone. No message here carries a byte of the Secret's values.
import { KubeConfig, type Cluster, type Context, type User } from '@kubernetes/client-node';
import { parse as parseYaml, YAMLParseError } from 'yaml';

/** A kubeconfig the agent will not use; the message names fields and positions, never values. */
export class KubeconfigRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KubeconfigRefusedError';
  }
}

/** Cluster fields the agent honours; `insecure-skip-tls-verify` and `proxy-url` are refused like the rest. */
const CLUSTER_FIELDS = ['server', 'certificate-authority-data', 'tls-server-name'] as const;
/** Inline credentials only: exec, auth-provider, token-file, file paths, basic auth, impersonation are refused. */
const USER_FIELDS = ['client-certificate-data', 'client-key-data', 'token'] as const;
const CONTEXT_FIELDS = ['cluster', 'user', 'namespace'] as const;
/** Present in kubeconfigs that tools write; carry no behaviour for a client. */
const IGNORED_FIELDS = new Set(['extensions']);
/** Refused fields that are named in the refusal; any other key is "an unknown field" (a key is Secret bytes too). */
const KNOWN_REFUSED = new Set([
  'exec',
  'auth-provider',
  'token-file',
  'tokenFile',
  'client-certificate',
  'client-key',
  'certificate-authority',
  'username',
  'password',
  'as',
  'as-uid',
  'as-groups',
  'as-user-extra',
  'insecure-skip-tls-verify',
  'proxy-url',
  'disable-compression',
]);

type Fields<K extends string> = Partial<Record<K, string>>;

/** Loads a kubeconfig held in memory (e.g. a Secret's `config` key) that may hold inline credentials only. */
export function kubeConfigFromYaml(yaml: string, source: string): KubeConfig {
  const refuse = (reason: string): never => {
    throw new KubeconfigRefusedError(`${source}: ${reason}`);
  };
  let document: unknown;
  try {
    // yaml caps alias expansion (maxAliasCount 100), so an alias bomb fails here too.
    document = parseYaml(yaml);
  } catch (error) {
    // The parser's message quotes the offending line: keep only where and what kind of error, not the cause.
    const where = error instanceof YAMLParseError ? ` (${yamlPosition(error)})` : '';
    return refuse(`not a kubeconfig: not valid YAML${where}`);
  }
  if (!isRecord(document)) return refuse('not a kubeconfig: not a YAML mapping');

  const clusters = entries(document, 'clusters', 'cluster', CLUSTER_FIELDS, refuse);
  const users = entries(document, 'users', 'user', USER_FIELDS, refuse);
  const contexts = entries(document, 'contexts', 'context', CONTEXT_FIELDS, refuse);
  const currentContext = document['current-context'];
  const context = contexts.find((c) => c.name === currentContext);
  const cluster = clusters.find((c) => c.name === context?.fields.cluster);
  if (!context || !cluster) return refuse('kubeconfig has no current context with a cluster');
  const user = users.find((u) => u.name === context.fields.user);

  const server = cluster.fields.server ?? '';
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    return refuse('cluster server is not a URL');
  }
  if (url.protocol !== 'https:') refuse(`cluster server must be https, got ${url.protocol}`);
  if (url.username || url.password) refuse('cluster server URL carries credentials, which are refused');

  const kubeConfig = new KubeConfig();
  const clusterOptions: Cluster = {
    name: cluster.name,
    server: server.replace(/\/$/, ''),
    skipTLSVerify: false,
    ...(cluster.fields['certificate-authority-data'] !== undefined
      ? { caData: cluster.fields['certificate-authority-data'] }
      : {}),
    ...(cluster.fields['tls-server-name'] !== undefined
      ? { tlsServerName: cluster.fields['tls-server-name'] }
      : {}),
  };
  const userOptions: User = {
    name: user?.name ?? 'none',
    ...(user?.fields['client-certificate-data'] !== undefined
      ? { certData: user.fields['client-certificate-data'] }
      : {}),
    ...(user?.fields['client-key-data'] !== undefined ? { keyData: user.fields['client-key-data'] } : {}),
    ...(user?.fields.token !== undefined ? { token: user.fields.token } : {}),
  };
  const contextOptions: Context = {
    name: context.name,
    cluster: cluster.name,
    user: userOptions.name,
    ...(context.fields.namespace !== undefined ? { namespace: context.fields.namespace } : {}),
  };
  kubeConfig.loadFromOptions({
    clusters: [clusterOptions],
    users: [userOptions],
    contexts: [contextOptions],
    currentContext: context.name,
  });
  return kubeConfig;
}

/** The named entries of `clusters`, `users` or `contexts`, each holding only allowed string fields. */
function entries<K extends string>(
  document: Record<string, unknown>,
  list: string,
  inner: string,
  allowed: readonly K[],
  refuse: (reason: string) => never,
): { name: string; fields: Fields<K> }[] {
  const value = document[list];
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) return refuse(`${list} is not a list`);
  return value.map((entry: unknown, index) => {
    const at = `${list}[${index}]`;
    if (!isRecord(entry) || typeof entry['name'] !== 'string') return refuse(`${at} has no name`);
    const body = entry[inner] ?? {};
    if (!isRecord(body)) return refuse(`${at}.${inner} is not a mapping`);
    const fields: Fields<K> = {};
    for (const [key, field] of Object.entries(body)) {
      if (IGNORED_FIELDS.has(key)) continue;
      if (!(allowed as readonly string[]).includes(key))
        return refuse(
          `${at}.${inner} uses ${KNOWN_REFUSED.has(key) ? JSON.stringify(key) : 'an unknown field'}, which is refused: an SKR kubeconfig may hold inline ` +
            `credentials only (${[...CLUSTER_FIELDS, ...USER_FIELDS].join(', ')}); exec and auth-provider ` +
            `plugins and file references are not run or read`,
        );
      if (typeof field !== 'string') return refuse(`${at}.${inner}.${key} is not a string`);
      fields[key as K] = field;
    }
    return { name: entry['name'], fields };
  });
}

function yamlPosition(error: YAMLParseError): string {
  const position = error.linePos?.[0];
  return `${error.code}${position ? ` at line ${position.line}, column ${position.col}` : ''}`;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
