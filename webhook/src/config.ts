// Configuration from the env vars the upstream runtime-watcher webhook reads, and matching flags; flags win.
import { Command, InvalidArgumentError, Option } from 'commander';
import { CONNECTION_LIMITS, DEFAULTS, KCP_LISTENER_IDENTITY, LIMITS, versionLine } from '@skr-watcher/api';
import { IN_CLUSTER } from './configuration-watch.js';

export interface WebhookConfig {
  /** Address the admission and metrics servers bind to. */
  host: string;
  webhookPort: number;
  metricsPort: number;
  tlsCertFile: string;
  tlsKeyFile: string;
  caCertFile: string;
  /** `host:port` of the KCP listener. */
  kcpAddr: string;
  /**
   * Subject CN the KCP server's certificate must carry besides naming the host; `*` accepts any certificate the CA
   * bundle signed for the host (a KCP gateway with a certificate of its own, such as upstream's).
   */
  kcpServerCn: string;
  kcpContract: 'v2';
  /**
   * Manager whose callback path carries the "look at everything" event the webhook sends as it starts (changes made
   * while no webhook ran have no event of their own); upstream's lifecycle-manager listens as `lifecycle-manager`.
   */
  resyncManager: string;
  maxBodyBytes: number;
  maxBodyBytesInFlight: number;
  maxConnections: number;
  idleTimeoutMs: number;
  workers: number;
  queueSize: number;
  backoffInitialMs: number;
  backoffMaxMs: number;
  eventMaxAgeMs: number;
  callbackTimeoutMs: number;
  callbackMinGapMs: number;
  shutdownDrainMs: number;
  certPollMs: number;
  /**
   * Name of the webhook's own ValidatingWebhookConfiguration, watched so that a deletion or a foreign change asks
   * KCP for a resync at once, not at its next requeue; `none`: not watched.
   */
  watchConfiguration: string;
  /** `https://host:port` of the SKR API server; `in-cluster`: from KUBERNETES_SERVICE_HOST/PORT. */
  skrApiServer: string;
  skrTokenFile: string;
  skrCaFile: string;
}

/** Everything but the TLS files and the KCP address has a default. */
export const CONFIG_DEFAULTS = {
  host: '0.0.0.0',
  webhookPort: 8443,
  metricsPort: 2112,
  kcpServerCn: KCP_LISTENER_IDENTITY,
  kcpContract: 'v2',
  resyncManager: DEFAULTS.manager,
  maxBodyBytes: LIMITS.admissionBodyBytes,
  maxBodyBytesInFlight: LIMITS.admissionBodyBytesInFlight,
  maxConnections: CONNECTION_LIMITS.webhook.maxConnections,
  idleTimeoutMs: CONNECTION_LIMITS.webhook.idleTimeoutMs,
  workers: 8,
  queueSize: 10_000,
  backoffInitialMs: 250,
  backoffMaxMs: 30_000,
  eventMaxAgeMs: 10 * 60_000,
  callbackTimeoutMs: 5_000,
  // At most 20 callbacks a second for one object, the KCP listener's budget per SKR (CALLBACK_BUDGET).
  callbackMinGapMs: 50,
  shutdownDrainMs: 10_000,
  certPollMs: 10_000,
  // Off unless asked: the Deployment the agent installs sets it (WATCH_CONFIGURATION=skr-webhook).
  watchConfiguration: 'none',
  skrApiServer: 'in-cluster',
  skrTokenFile: IN_CLUSTER.tokenFile,
  skrCaFile: IN_CLUSTER.caFile,
} as const satisfies Partial<WebhookConfig>;

/** The dispatch thread's settings out of the webhook's configuration (flag names → the thread's names). */
export function dispatchSettings(
  config: Pick<
    WebhookConfig,
    | 'workers'
    | 'queueSize'
    | 'backoffInitialMs'
    | 'backoffMaxMs'
    | 'eventMaxAgeMs'
    | 'callbackTimeoutMs'
    | 'callbackMinGapMs'
    | 'kcpServerCn'
    | 'resyncManager'
  >,
) {
  return {
    workers: config.workers,
    maxQueue: config.queueSize,
    backoffInitialMs: config.backoffInitialMs,
    backoffMaxMs: config.backoffMaxMs,
    maxAgeMs: config.eventMaxAgeMs,
    callbackTimeoutMs: config.callbackTimeoutMs,
    minGapMs: config.callbackMinGapMs,
    kcpServerCn: config.kcpServerCn,
    resyncManager: config.resyncManager,
  };
}

type Key = keyof WebhookConfig;
interface Setting {
  key: Key;
  flag: string;
  env: string;
  description: string;
  kind: 'string' | 'port' | 'count' | 'ms' | 'contract';
}

const SETTINGS: Setting[] = [
  { key: 'host', flag: '--host <address>', env: 'WEBHOOK_HOST', description: 'bind address', kind: 'string' },
  {
    key: 'webhookPort',
    flag: '--webhook-port <port>',
    env: 'WEBHOOK_PORT',
    description: 'HTTPS port for POST /validate/<manager>',
    kind: 'port',
  },
  {
    key: 'metricsPort',
    flag: '--metrics-port <port>',
    env: 'METRICS_PORT',
    description: 'plain-HTTP port for /metrics, /healthz, /readyz',
    kind: 'port',
  },
  {
    key: 'tlsCertFile',
    flag: '--tls-cert <file>',
    env: 'TLS_CERT',
    description:
      'PEM certificate: serves admission and is the client certificate towards KCP (reloaded on change)',
    kind: 'string',
  },
  {
    key: 'tlsKeyFile',
    flag: '--tls-key <file>',
    env: 'TLS_KEY',
    description: 'PEM private key of --tls-cert (reloaded on change)',
    kind: 'string',
  },
  {
    key: 'caCertFile',
    flag: '--ca-cert <file>',
    env: 'CA_CERT',
    description: "PEM CA bundle that verifies the KCP listener's certificate (reloaded on change)",
    kind: 'string',
  },
  {
    key: 'kcpAddr',
    flag: '--kcp-addr <host:port>',
    env: 'KCP_ADDR',
    description: 'KCP listener; events go to https://<host:port>/v2/<manager>/event',
    kind: 'string',
  },
  {
    key: 'kcpServerCn',
    flag: '--kcp-server-cn <cn>',
    env: 'KCP_SERVER_CN',
    description:
      "subject CN the KCP server's certificate must carry besides the host name (the agent listener's; no SKR " +
      "certificate may carry it); '*' accepts any the CA bundle signed for the host, e.g. a KCP gateway's",
    kind: 'string',
  },
  {
    key: 'kcpContract',
    flag: '--kcp-contract <version>',
    env: 'KCP_CONTRACT',
    description: 'callback contract; only v2 is supported',
    kind: 'contract',
  },
  {
    key: 'resyncManager',
    flag: '--resync-manager <name>',
    env: 'RESYNC_MANAGER',
    description:
      'manager whose path (/v2/<name>/event) carries the callback, sent at start, that asks KCP to reconcile ' +
      "this SKR in full (after dropped events the dropped events' manager is used)",
    kind: 'string',
  },
  {
    key: 'maxBodyBytes',
    flag: '--max-body-bytes <bytes>',
    env: 'MAX_BODY_BYTES',
    description: 'larger AdmissionReviews are answered 413',
    kind: 'count',
  },
  {
    key: 'maxBodyBytesInFlight',
    flag: '--max-body-bytes-in-flight <bytes>',
    env: 'MAX_BODY_BYTES_IN_FLIGHT',
    description:
      'bodies of reviews being read hold at most this together; a review beyond it is answered 503',
    kind: 'count',
  },
  {
    key: 'maxConnections',
    flag: '--max-connections <n>',
    env: 'MAX_CONNECTIONS',
    description: 'open connections at most; more are closed on accept',
    kind: 'count',
  },
  {
    key: 'idleTimeoutMs',
    flag: '--idle-timeout-ms <ms>',
    env: 'IDLE_TIMEOUT_MS',
    description: 'a TLS handshake not finished, or a request silent, this long is cut',
    kind: 'ms',
  },
  {
    key: 'workers',
    flag: '--dispatch-workers <n>',
    env: 'DISPATCH_WORKERS',
    description: 'callbacks in flight at once',
    kind: 'count',
  },
  {
    key: 'queueSize',
    flag: '--queue-size <n>',
    env: 'QUEUE_SIZE',
    description: 'objects with an undelivered event held at most; beyond it events are dropped',
    kind: 'count',
  },
  {
    key: 'backoffInitialMs',
    flag: '--backoff-initial-ms <ms>',
    env: 'BACKOFF_INITIAL_MS',
    description: 'first retry delay (doubles per attempt, with jitter)',
    kind: 'ms',
  },
  {
    key: 'backoffMaxMs',
    flag: '--backoff-max-ms <ms>',
    env: 'BACKOFF_MAX_MS',
    description: 'retry delay cap',
    kind: 'ms',
  },
  {
    key: 'eventMaxAgeMs',
    flag: '--event-max-age-ms <ms>',
    env: 'EVENT_MAX_AGE_MS',
    description: "undelivered events older than this are dropped (KCP's resync covers them)",
    kind: 'ms',
  },
  {
    key: 'callbackTimeoutMs',
    flag: '--callback-timeout-ms <ms>',
    env: 'CALLBACK_TIMEOUT_MS',
    description: 'timeout of one callback attempt',
    kind: 'ms',
  },
  {
    key: 'callbackMinGapMs',
    flag: '--callback-min-gap-ms <ms>',
    env: 'CALLBACK_MIN_GAP_MS',
    description:
      'an object changed again while its callback was on the way is sent again no sooner than this after it (1 = at once)',
    kind: 'ms',
  },
  {
    key: 'shutdownDrainMs',
    flag: '--shutdown-drain-ms <ms>',
    env: 'SHUTDOWN_DRAIN_MS',
    description: 'on SIGTERM, time allowed to deliver queued events',
    kind: 'ms',
  },
  {
    key: 'certPollMs',
    flag: '--cert-poll-ms <ms>',
    env: 'CERT_POLL_MS',
    description: 'fallback poll of the certificate files (directory watches are the fast path)',
    kind: 'ms',
  },
  {
    key: 'watchConfiguration',
    flag: '--watch-configuration <name>',
    env: 'WATCH_CONFIGURATION',
    description:
      'own ValidatingWebhookConfiguration, watched in the SKR: deleted or changed by anyone but the agent, it ' +
      'makes the webhook ask KCP for a resync that repairs it; "none": not watched',
    kind: 'string',
  },
  {
    key: 'skrApiServer',
    flag: '--skr-api-server <url>',
    env: 'SKR_API_SERVER',
    description: 'SKR API server for that watch; "in-cluster": KUBERNETES_SERVICE_HOST and _PORT',
    kind: 'string',
  },
  {
    key: 'skrTokenFile',
    flag: '--skr-token-file <file>',
    env: 'SKR_TOKEN_FILE',
    description: "bearer token for the SKR API server (the Pod's ServiceAccount token; re-read per request)",
    kind: 'string',
  },
  {
    key: 'skrCaFile',
    flag: '--skr-ca-file <file>',
    env: 'SKR_CA_FILE',
    description: "CA of the SKR API server's certificate",
    kind: 'string',
  },
];

function parseValue(setting: Setting, raw: string): string | number {
  const fail = (expected: string) => {
    throw new InvalidArgumentError(
      `${setting.flag.split(' ')[0]} / ${setting.env}: "${raw}" is not ${expected}`,
    );
  };
  switch (setting.kind) {
    case 'string':
      if (raw.trim() === '') fail('a non-empty value');
      return raw;
    case 'contract':
      if (raw !== 'v2') fail('a supported contract (v2)');
      return raw;
    case 'port': {
      const port = Number(raw);
      if (!/^\d+$/.test(raw) || port > 65535) fail('a port (0-65535)');
      return port;
    }
    case 'count':
    case 'ms': {
      const value = Number(raw);
      if (!/^\d+$/.test(raw) || value < 1)
        fail(setting.kind === 'ms' ? 'a positive number of milliseconds' : 'a positive integer');
      return value;
    }
  }
}

/** The `skr-webhook` command line; `action` receives the resolved configuration. */
export function webhookCommand(action: (config: WebhookConfig) => Promise<void>): Command {
  const command = new Command('skr-webhook')
    .description(
      'SKR admission webhook. Answers every AdmissionReview with allowed=true at once and tells the KCP ' +
        'listener about relevant changes asynchronously, over mutual TLS. Each option can also be set ' +
        'through the environment variable named beside it (an empty one counts as unset); a flag wins over ' +
        'its variable.',
    )
    .addHelpText(
      'after',
      '\nAlso: LOG_LEVEL (trace|debug|info|warn|error; default info). Logs are JSON lines on stdout.\n' +
        'Endpoints: POST https://<host>:<webhook-port>/validate/<manager>; http://<host>:<metrics-port>/metrics,\n' +
        '/healthz, /readyz. Certificate files are re-read when they change (Secret volume symlink swaps).',
    )
    .version(versionLine('skr-webhook'), '-V, --version', 'print the version and exit')
    .showHelpAfterError();
  const attributes = new Map<Key, string>();
  for (const setting of SETTINGS) {
    const fallback = (CONFIG_DEFAULTS as Partial<Record<Key, string | number>>)[setting.key];
    const option = new Option(setting.flag, setting.description)
      .env(setting.env)
      // Empty means unset (manifests template env values; an empty one must not override the default).
      .argParser((raw: string) => (raw === '' ? fallback : parseValue(setting, raw)));
    if (fallback !== undefined) option.default(fallback);
    command.addOption(option);
    attributes.set(setting.key, option.attributeName());
  }
  command.action(async (options: Record<string, string | number | undefined>) => {
    const resolved: Partial<Record<Key, string | number>> = {};
    for (const setting of SETTINGS) resolved[setting.key] = options[attributes.get(setting.key) as string];
    // An empty variable without a default reaches here as '' (commander's stand-in for a parsed nothing).
    const missing = SETTINGS.filter((s) => resolved[s.key] === undefined || resolved[s.key] === '').map(
      (s) => `${s.flag.split(' ')[0]} (env ${s.env})`,
    );
    if (missing.length > 0) command.error(`missing required settings: ${missing.join(', ')}`);
    const config = resolved as WebhookConfig;
    if (config.backoffMaxMs < config.backoffInitialMs) {
      command.error(`--backoff-max-ms (${config.backoffMaxMs}) must not be below --backoff-initial-ms`);
    }
    if (config.maxBodyBytesInFlight < config.maxBodyBytes) {
      command.error(
        `--max-body-bytes-in-flight (${config.maxBodyBytesInFlight}) must not be below --max-body-bytes (${config.maxBodyBytes}): ` +
          'the largest review would always be refused',
      );
    }
    await action(config);
  });
  return command;
}
