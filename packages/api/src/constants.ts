/** API group of every resource this project owns; shared with Kyma's lifecycle-manager. */
export const GROUP = 'operator.kyma-project.io';

export const VERSIONS = {
  /** Kyma, ModuleTemplate, ModuleReleaseMeta and Watcher are served at v1beta2 upstream. */
  kyma: 'v1beta2',
  moduleTemplate: 'v1beta2',
  moduleReleaseMeta: 'v1beta2',
  watcher: 'v1beta2',
  /** One installed module of one Kyma, upstream's kind at upstream's version. */
  manifest: 'v1beta2',
  /** ModuleConfig and SyncResource are this project's own, hence alpha. */
  moduleConfig: 'v1alpha1',
  syncResource: 'v1alpha1',
  /** The sample module used by tests and the demo. */
  sample: 'v1alpha1',
} as const;

export const KINDS = {
  kyma: { kind: 'Kyma', plural: 'kymas', version: VERSIONS.kyma },
  moduleTemplate: { kind: 'ModuleTemplate', plural: 'moduletemplates', version: VERSIONS.moduleTemplate },
  moduleReleaseMeta: {
    kind: 'ModuleReleaseMeta',
    plural: 'modulereleasemetas',
    version: VERSIONS.moduleReleaseMeta,
  },
  watcher: { kind: 'Watcher', plural: 'watchers', version: VERSIONS.watcher },
  manifest: { kind: 'Manifest', plural: 'manifests', version: VERSIONS.manifest },
  moduleConfig: { kind: 'ModuleConfig', plural: 'moduleconfigs', version: VERSIONS.moduleConfig },
  syncResource: { kind: 'SyncResource', plural: 'syncresources', version: VERSIONS.syncResource },
  sample: { kind: 'Sample', plural: 'samples', version: VERSIONS.sample },
} as const;

export const LABELS = {
  /** On the KCP Kyma: the SKR's identity, equal to the CN of its client certificate. */
  runtimeId: 'kyma-project.io/runtime-id',
  /** Links Secrets, ModuleConfigs and SyncResources to their Kyma. */
  kymaName: 'operator.kyma-project.io/kyma-name',
  /** On ModuleConfigs: which module the mirrored Module CR belongs to, so managers can filter. */
  moduleName: 'operator.kyma-project.io/module-name',
  /** Which component owns an object we created. */
  managedBy: 'operator.kyma-project.io/managed-by',
  /** Objects the SKR webhook watches carry this label; the value names the manager. */
  watchedBy: 'operator.kyma-project.io/watched-by',
  /** "true" pauses reconciliation of a Kyma. */
  skipReconciliation: 'operator.kyma-project.io/skip-reconciliation',
  /** "true" on a Kyma admits beta modules; on a ModuleTemplate, marks it beta (upstream's label). */
  beta: 'operator.kyma-project.io/beta',
  /** "true" on a Kyma admits internal modules; on a ModuleTemplate, marks it internal. */
  internal: 'operator.kyma-project.io/internal',
  /** "false" on a ModuleTemplate keeps it out of every SKR's module catalog (upstream's label). */
  sync: 'operator.kyma-project.io/sync',
  /** On a KCP Kyma: the agent replica that owns it (sharding, decision 012); only that replica reconciles it. */
  shardOwner: 'operator.kyma-project.io/skr-agent-shard',
  /** On a replica's membership Lease: the ring it belongs to, so replicas list exactly their peers. */
  shardRing: 'operator.kyma-project.io/skr-agent-ring',
  /**
   * On ModuleConfigs and SyncResources: the shard bucket of their Kyma (decimal, `bucketOf(kyma name)`), so a sharded
   * replica watches only its buckets' dependents (decision 012).
   */
  shardBucket: 'operator.kyma-project.io/skr-agent-bucket',
  /** On a Manifest: the channel it was resolved from (upstream's; absent on mandatory modules' Manifests). */
  channel: 'operator.kyma-project.io/channel',
  /** On a Manifest: copied from the ModuleTemplate's label of the same key, "" when it has labels but not this one. */
  controllerName: 'operator.kyma-project.io/controller-name',
  /** "true" on the Manifest of a mandatory module (upstream's), which no Kyma lists. */
  mandatoryModule: 'operator.kyma-project.io/mandatory-module',
  /** On the KCP Kyma (set by the provisioning broker): the BTP global account; copied to the SKR Kyma as upstream does. */
  globalAccountId: 'kyma-project.io/global-account-id',
  /** On the KCP Kyma (set by the provisioning broker): the BTP subaccount; copied to the SKR Kyma as upstream does. */
  subaccountId: 'kyma-project.io/subaccount-id',
  /** On the KCP Kyma (set by the provisioning broker): the service instance; upstream's metrics report it. */
  instanceId: 'kyma-project.io/instance-id',
} as const;

/**
 * What upstream lifecycle-manager keeps on the SKR Kyma and on the SKR's kyma-system Namespace, so that its tooling
 * (selectors on `managed-by=kyma`) finds them in an SKR this agent runs (decision 027). The agent's own objects keep
 * `managed-by: skr-watcher` (MANAGED_BY), which its own selectors rely on.
 */
export const SKR_UPSTREAM_LABELS = {
  /** On the SKR Kyma, unless a Watcher of Kymas needs another value of the same key to select it. */
  kyma: { [LABELS.managedBy]: 'kyma', [LABELS.watchedBy]: 'kyma' },
  /** Copied from the KCP Kyma to the SKR Kyma, each when the KCP Kyma has it. */
  copiedFromKcpKyma: [LABELS.runtimeId, LABELS.globalAccountId, LABELS.subaccountId],
  /** On kyma-system: upstream's owner mark, Istio sidecar injection and the Warden admission check. */
  namespace: {
    [LABELS.managedBy]: 'kyma',
    'istio-injection': 'enabled',
    'namespaces.warden.kyma-project.io/validate': 'enabled',
  },
} as const;

export const ANNOTATIONS = {
  /** The SKR's DNS name; a SAN of its certificates. */
  skrDomain: 'skr-domain',
  /** Written on the SKR Kyma by broken-watcher detection; must come back as an event. */
  watcherProbe: 'operator.kyma-project.io/watcher-probe',
  /** On a KCP Kyma: the SKR webhook runs outside the SKR at this https URL (local SKRs); else in-cluster. */
  skrWebhookUrl: 'operator.kyma-project.io/skr-webhook-url',
  /**
   * On a ModuleConfig: sha256 of the spec the agent last wrote, so the watch tells the agent's own writes (the
   * spec hashes to it: nothing to do) from edits by hand (it does not: put the mirror back).
   */
  mirroredSpecHash: 'operator.kyma-project.io/mirrored-spec-hash',
  /** On a replica's membership Lease: host:port where peers forward callbacks for the Kymas it owns. */
  peerAddress: 'operator.kyma-project.io/skr-agent-peer-address',
  /**
   * On a replica's membership Lease: how it places Kymas on the ring (`buckets`). Replicas place by bucket only when
   * every member says so; a member without it (an older version) keeps everyone on runtime-ids.
   */
  shardPlacement: 'operator.kyma-project.io/skr-agent-placement',
  /** On a Manifest: the module's OCM component name, which with the version finds its descriptor (upstream's). */
  ocmComponentName: 'operator.kyma-project.io/ocm-component-name',
  /** On a Manifest: the same value under upstream's deprecated key, still written by upstream. */
  fqdn: 'operator.kyma-project.io/fqdn',
  /** "true" on a Manifest whose module is `managed: false`: its SKR objects are left to the user (upstream's). */
  isUnmanaged: 'operator.kyma-project.io/is-unmanaged',
  /** On a Manifest: the JSON of its template's `customStateCheck`, how the default CR maps onto the module's state. */
  customStateCheck: 'operator.kyma-project.io/custom-state-check',
  /** On a Manifest: the raw-manifest digest last fully installed, so an upgrade is seen as one (upstream's key). */
  syncOciRef: 'sync-oci-ref',
  /**
   * "true" on a Secret of the deployer module's raw manifest: its data is replaced by that of the KCP Secret of the
   * same name (upstream's, see agent/src/reconcile/manifests/inject-data-from-kcp.ts).
   */
  injectDataFromKcp: 'operator.kyma-project.io/inject-data-from-kcp',
} as const;

/** Sharding of Kymas over agent replicas (decision 012). */
export const SHARDING = {
  /** Default ring name: replicas with the same ring share the Kymas of one namespace. */
  ring: 'skr-agent',
  /**
   * Points per replica on the hash ring: with 400 each of three shards of 5,000 Kymas stays within about 5 % of a
   * third (100 gave 29–37 %), and a joining fourth takes close to a quarter; building the ring costs a millisecond.
   */
  virtualNodes: 400,
  /**
   * The ring places buckets of Kymas (a hash of the Kyma's name), not Kymas, so that a Kyma's dependents can be
   * selected by a bucket label. 4,096: at 5,000 Kymas joins move and balance as per-Kyma placement did (a third
   * joining two: 33.2 % moved, largest 35.2 %; per Kyma 33.3 / 35.0 %), and a replica's selector stays ~7 kB.
   * Changing it re-buckets every Kyma: the label of every dependent is rewritten.
   */
  buckets: 4096,
  /** A replica's dependents watches, grown piecewise by changes of its buckets, are merged into one after this. */
  bucketConsolidateMs: 30_000,
  /** Handovers and claims written at once; each is one small PATCH to the KCP. */
  relabelConcurrency: 16,
  /**
   * Reconciles a replica runs at once (agent/src/sharding/pacing.ts): two at first, +2 per membership renewal on
   * time (every retry period, so 32 after 30 s at the defaults), halved by a late one. A start-up of 333 Kymas
   * per replica on 2 cores otherwise starved the replicas' own renewals (decision 012).
   */
  pacing: {
    initialRuns: 2,
    maxRuns: 32,
    widenBy: 2,
    /**
     * A run still going after this long, while renewals are on time, waits on a cluster other than the KCP (the
     * work queue's slow mark): its slot goes to the next run, so hung SKRs, each holding a run up to the 30 s
     * reconcile deadline, do not stall the rest.
     */
    slotHeldMs: 1_000,
  },
  /** Coalesces bursts of Kyma and membership events into one assignment pass. */
  assignDebounceMs: 50,
  /** Released or long-expired membership Leases are deleted after this many lease durations. */
  leaseGarbageAfterDurations: 4,
  /** Path of the peer endpoint that takes a callback forwarded by a replica that does not own the Kyma. */
  forwardPath: '/internal/v1/forward',
  /** A forwarded callback is a small JSON document; anything larger is refused. */
  forwardBodyBytes: 16 * 1024,
  /** A forward that takes longer falls back to the owner's resync; it is a loopback or cluster-local hop. */
  forwardTimeoutMs: 2_000,
} as const;

/** The value of `managed-by` on everything the agent creates. */
export const MANAGED_BY = 'skr-watcher';

/**
 * Marks that say who holds an object in an SKR, besides a module's (`managed-by: kyma` and upstream's owned-by
 * annotation): each object belongs to one module, one SyncResource or the agent itself (decision 026).
 */
export const HOLDER_MARKS = {
  /** On objects a SyncResource applies: `<namespace>/<name>` of the SyncResource (with `managed-by: skr-watcher`). */
  syncResourceAnnotation: 'operator.kyma-project.io/sync-resource',
  /** On an object that existed before a set first wrote it: never deleted with the set, only let go. */
  adoptedAnnotation: 'operator.kyma-project.io/adopted',
} as const;

/**
 * Upstream lifecycle-manager's own names on what it leaves behind (decision 028): the agent honours its Manifest
 * finalizers and takes over what these managers own (`skr-agent takeover`).
 */
export const LIFECYCLE_MANAGER = {
  /** Field manager of its applies into SKRs and of its Manifests' status and finalizers. */
  applyFieldManager: 'declarative.kyma-project.io/applier',
  /** Field manager of its Kyma reconciler, its SKR webhook objects and its webhook Certificates. */
  fieldManager: 'lifecycle-manager',
  /** `managed-by` on its SKR webhook objects and on its certificate Secrets. */
  managedBy: 'lifecycle-manager',
  /** Its Manifest finalizers: install (with label removal), and the default CR's while that CR exists. */
  finalizers: [
    'declarative.kyma-project.io/finalizer',
    'label-removal-finalizer',
    'resource.kyma-project.io/finalizer',
  ] as readonly string[],
  /** Its Kyma finalizers: the Kyma reconciler's, and its purge controller's. */
  kymaFinalizers: [
    'operator.kyma-project.io/Kyma',
    'operator.kyma-project.io/purge-finalizer',
  ] as readonly string[],
} as const;

/** Server-side apply field manager of the agent; one name so ownership is stable across restarts. */
export const FIELD_MANAGER = 'skr-watcher-agent';

/**
 * Manifests (docs/decisions/021): upstream's names where its tooling reads them (labels, annotations, the Kyma
 * side's field manager), so Manifests written by either controller read the same; the agent's own finalizer and
 * SKR field manager (decision 028), so a takeover from lifecycle-manager is a visible handover, not a shared name.
 */
export const MANIFEST = {
  /** `managed-by` on the Manifest itself: upstream's value, which its tooling selects Manifests by. */
  managedBy: 'lifecycle-manager',
  /** Field manager of the Kyma side's writes of a Manifest (upstream's: its Kyma reconciler applies it so). */
  kymaFieldManager: 'lifecycle-manager',
  /** Field manager of the objects applied into the SKR and of the Manifest's status. */
  applyFieldManager: 'skr-watcher-modules',
  /** Field manager of the default CR's creation (upstream creates it under its CR finalizer's name). */
  resourceFieldManager: 'resource.kyma-project.io/finalizer',
  /** The module's objects are removed from the SKR (default CR first) before the Manifest goes. */
  finalizer: 'operator.kyma-project.io/skr-watcher-manifest',
  /** install.name: only the raw manifest is rendered. */
  installName: 'raw-manifest',
  /** Upstream's cut of a generated Manifest name (LM#3440): 63 characters or more become 62. */
  nameLimit: 62,
} as const;

/**
 * Conditions of a Manifest (upstream's types, reasons and messages): each starts False and turns True once.
 * `ModuleCR` is there only when the Manifest has a default CR under policy CreateAndDelete.
 */
export const MANIFEST_CONDITIONS = {
  resources: {
    type: 'Resources',
    reason: 'ResourcesAvailable',
    falseMessage: 'resources not parsed',
    trueMessage: 'resources are parsed and ready for use',
  },
  installation: {
    type: 'Installation',
    reason: 'Ready',
    falseMessage: 'installation is not ready',
    trueMessage: 'installation is ready and resources can be used',
  },
  moduleCr: {
    type: 'ModuleCR',
    reason: 'ModuleCRCreated',
    falseMessage: 'module CR has not been created to SKR',
    trueMessage: 'module CR was created',
  },
} as const;

/** Finalizer that guards the ordered cleanup of a Kyma. */
export const KYMA_FINALIZER = 'operator.kyma-project.io/skr-watcher';

/** Defaults for where things live. */
export const DEFAULTS = {
  kcpNamespace: 'kcp-system',
  skrNamespace: 'kyma-system',
  skrKymaName: 'default',
  channel: 'regular',
  /** Key of the kubeconfig in the KCP Secret labelled with the Kyma name. */
  kubeconfigSecretKey: 'config',
  /** Name of the manager in callback paths (`/v2/<manager>/event`). */
  manager: 'lifecycle-manager',
} as const;

/** Limits on the wire. */
export const LIMITS = {
  /** The listener refuses callback bodies above 16 KiB, as the reference listener does. */
  eventBodyBytes: 16 * 1024,
  /** UPDATE reviews carry two objects; a few MiB covers any CR the API server accepts (etcd caps at 1.5 MiB). */
  admissionBodyBytes: 4 * 1024 * 1024,
  /**
   * Bodies of admission reviews being read at once, together: two of the largest. Each costs several times its
   * size while parsed, and the webhook's memory limit is sized for this (decision 015); reviews of ordinary CRs
   * (kilobytes) never come near it.
   */
  admissionBodyBytesInFlight: 8 * 1024 * 1024,
  /**
   * Largest SKR API answer the agent reads: one object is at most 1.5 MiB (etcd) and lists are paged to fit, so
   * 8 MiB is ample, and a hostile SKR costs at most this per request in flight instead of the agent's memory.
   */
  skrResponseBytes: 8 * 1024 * 1024,
  /**
   * Connections per SKR client. A pass sends its SKR requests one after another, yet undici's pool opened a second
   * connection for the second request (the first connection not yet marked free), so a TLS handshake more on both
   * sides per pass; requests made at once (a targeted mirror during a pass) wait for one another (decision 016).
   */
  skrConnections: 1,
  /** API error answers are small Status objects; their text travels into messages and status. */
  apiErrorBodyBytes: 64 * 1024,
  /**
   * Deepest nesting of an object the agent mirrors: real Module CRs nest a dozen levels, and recursion (clone,
   * deep comparison) stays far from the stack limit, which 9,000 levels (accepted by the API server) exceed.
   */
  objectDepth: 100,
} as const;

/**
 * What SyncResource items may apply or delete in an SKR unless the agent is configured otherwise: the
 * configuration module managers hand their modules (ConfigMaps, Secrets) in the Kyma namespace. Kinds are
 * written `Kind` for the core group and `Kind.group` otherwise, as kubectl does; cluster-scoped objects are refused.
 */
export const SYNC_RESOURCE_ALLOWED = {
  kinds: ['ConfigMap', 'Secret'],
  namespaces: [DEFAULTS.skrNamespace],
} as const;

/**
 * Connections each server holds at most, and how long one may stay silent (or sit in an unfinished TLS
 * handshake) before it is closed, so that idle or hostile peers cannot exhaust the process's descriptors.
 */
export const CONNECTION_LIMITS = {
  /** Thousands of SKRs keep a connection or a few alive; 10,000 leaves room under a 64 Ki descriptor limit. */
  listener: { maxConnections: 10_000, idleTimeoutMs: 10_000 },
  /** Only the SKR's API server calls the webhook, one connection per concurrent review. */
  webhook: { maxConnections: 1_000, idleTimeoutMs: 10_000 },
  /** Only replicas call a peer endpoint, each with at most 32 kept-alive connections (the forwarder): 16 replicas fit. */
  peer: { maxConnections: 512, idleTimeoutMs: 10_000 },
} as const;

/**
 * Subject CN of the KCP listener's certificate (the agent's identity). SKR leaves come from the same CA with CN =
 * runtime-id, so this name is reserved: no SKR leaf may carry it, the listener refuses it as a client, and SKR
 * webhooks accept a KCP server only under it. That is what keeps an SKR's leaf from serving as the listener.
 */
export const KCP_LISTENER_IDENTITY = 'skr-agent-listener';

/**
 * Cipher suites every TLS server of the system offers (Node's `ciphers` option): TLS 1.3's AEAD suites and, on
 * TLS 1.2, ECDHE with AES-GCM or ChaCha20-Poly1305 only. Node's default also accepts static-RSA and CBC suites
 * (no forward secrecy, padding-oracle history); Go's TLS stack (the API server, the reference webhook) offers
 * these ECDHE AEAD suites, so nothing the system talks to needs more.
 */
export const TLS_SERVER_CIPHERS = [
  'TLS_AES_128_GCM_SHA256',
  'TLS_AES_256_GCM_SHA384',
  'TLS_CHACHA20_POLY1305_SHA256',
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');

/** Per-state requeue intervals in milliseconds, as the reference KCP uses. */
export const REQUEUE_MS = {
  Ready: 5 * 60_000,
  Processing: 5_000,
  Warning: 30_000,
  Error: 2_000,
  /** Failures back off from 5 s to 30 s. */
  backoffBase: 5_000,
  backoffMax: 30_000,
} as const;

/** How long a reconciled Kyma waits for its next look, by the state it ended in (`--requeue-*` flags). */
export type RequeueIntervals = Readonly<Record<'Ready' | 'Processing' | 'Warning' | 'Error', number>>;

/** The per-state defaults of REQUEUE_MS as a RequeueIntervals value. */
export const DEFAULT_REQUEUE_INTERVALS: RequeueIntervals = {
  Ready: REQUEUE_MS.Ready,
  Processing: REQUEUE_MS.Processing,
  Warning: REQUEUE_MS.Warning,
  Error: REQUEUE_MS.Error,
};

/**
 * What one SKR (runtime-id) may cost the agent: a flood from one SKR's certificate must not make the
 * agent work for it. A webhook coalesces per object and honours Retry-After, so a well-behaved SKR stays far below.
 */
export const CALLBACK_BUDGET = {
  /** Callbacks per second one runtime-id may send to one listener replica, over time. */
  perSecond: 20,
  /** Callbacks one runtime-id may send at once (a module install's objects each call back). */
  burst: 100,
  /**
   * Callbacks of one Kyma that would start a full reconcile within this long of the last one they started are merged
   * into one more at its end: the first wakes it at once, a flood costs one full reconcile per interval.
   */
  fullReconcileIntervalMs: 1_000,
} as const;

/** The listener's answers to a callback. */
export const LISTENER_STATUS = {
  accepted: 200,
  badRequest: 400,
  unauthenticated: 401,
  forbidden: 403,
  notFound: 404,
  methodNotAllowed: 405,
  payloadTooLarge: 413,
  unsupportedMediaType: 415,
  /** The SKR sent more callbacks than its share (CALLBACK_BUDGET); Retry-After says when to send again. */
  tooManyRequests: 429,
  /** Accepted but not delivered to the Kyma's owner (a replica gone or unreachable): the webhook sends it again. */
  unavailable: 503,
} as const;

/**
 * Drift of the objects a module installed in an SKR: the SKR webhook sees their writes through one
 * label-selected rule and wakes the Kyma only for a change that the agent would put back.
 */
export const DRIFT = {
  /** `managed-by` on every object of a module in an SKR (upstream's transform; the Manifest itself says lifecycle-manager). */
  managedByValue: 'kyma',
  /** Writes under these field managers are the agent's own (its applies of Manifests and SyncResources): never drift. */
  agentFieldManagers: [MANIFEST.applyFieldManager, FIELD_MANAGER] as readonly string[],
  /**
   * Annotations that controllers and clients rewrite on objects they do not own; a change of only these (and of
   * status or volatile metadata) is no drift: the agent applies none of them, so a pass would put nothing back.
   */
  churnedAnnotations: [
    'deployment.kubernetes.io/revision',
    'deployment.kubernetes.io/desired-replicas',
    'deployment.kubernetes.io/max-replicas',
    'kubectl.kubernetes.io/last-applied-configuration',
    'control-plane.alpha.kubernetes.io/leader',
    'endpoints.kubernetes.io/last-change-trigger-time',
    'deprecated.daemonset.template.generation',
  ] as readonly string[],
} as const;
