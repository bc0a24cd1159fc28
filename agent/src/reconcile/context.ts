// What every step of a reconcile needs, built once per Reconciler and passed down explicitly.
import type { LoadedPolicy } from '../rollout/policy-file.js';
import {
  GROUP,
  KINDS,
  isRecord,
  type Kyma,
  type Manifest,
  type RequeueIntervals,
  type TrackingObject,
} from '@skr-watcher/api';
import { withContext, type ClusterClient, type CustomObjectRef, type SkrClients } from '@skr-watcher/kube';
import type { Logger } from '@skr-watcher/telemetry';
import type { PkiCache, RegistrationOptions, WatcherHealth } from '../registration/index.js';
import type { EventRecorder } from './events.js';
import type { PurgeSettings } from './kyma/purge-settings.js';

/** Where a module version's raw manifest lies and which images it localizes (from its OCM descriptor). */
export interface ModuleDescription {
  install: { name: string; source: { repo: string; name: string; ref: string; type: string } };
  localizedImages: string[];
}

/** Module installation from an OCI registry; set on the ReconcileContext only with --oci-registry-host. */
export interface ModuleInstallation {
  /**
   * The descriptor `<registry>/component-descriptors/<ocmComponentName>:<version>`, read and checked. Throws for
   * anything that fails this module (registry down, bad descriptor); the message goes into the module's status.
   */
  describe(ocmComponentName: string, version: string): Promise<ModuleDescription>;
  /**
   * The objects of a Manifest's raw manifest (`spec.install.source`), pulled, digest-checked and parsed. Throws for
   * what fails this module (registry, digest, malformed YAML); the message goes into the Manifest's status.
   */
  objects(manifest: Manifest): Promise<unknown[]>;
  /**
   * Maintenance windows: an upgrade whose template `requiresDowntime` waits for the Kyma's window. `policy()` is the
   * policy as last read (or why it could not be); without this setting such an upgrade is an Error, as upstream's.
   */
  maintenance?: { policy(): LoadedPolicy | undefined; minWindowMs: number };
  /**
   * Upstream's --skr-image-pull-secret: this Secret of the KCP namespace is copied into each SKR (next to the SKR
   * Kyma), and every module workload names it in `imagePullSecrets` (its manager also gets `SKR_IMG_PULL_SECRET`).
   */
  skrImagePullSecret?: string;
  /**
   * Upstream's --restricted-default-modules: these modules are offered only to the Kymas their ModuleReleaseMeta's
   * kymaSelector selects, and to no Kyma without one.
   */
  restrictedModules?: ReadonlySet<string>;
  /** Counts what a Manifest's pass did: an install, upgrade or removal finished, or a pass of one that failed. */
  observe?(operation: ModuleOperation, outcome: 'success' | 'error'): void;
}

export type ModuleOperation = 'install' | 'upgrade' | 'delete';

/** Names from a cache; undefined when the cache does not cover the Kyma (a sharded replica's other buckets). */
export type SyncResourceNames = string[] | undefined;

/** A Module CR of a Kyma as a lane names it; the version is left out (one object, whichever version it is read in). */
export interface MirroredObject {
  group: string;
  kind: string;
  namespace: string;
  name: string;
}

export interface RegistrationSettings {
  options: RegistrationOptions;
  /** Broken-watcher detection; without it the webhook is installed but never probed. */
  health?: WatcherHealth;
  /** The KCP PKI Secrets from watches; the reconciler starts them when run by a controller (index.ts). */
  pki?: PkiCache;
  /**
   * The CA or the trust bundle changed (pki-cache.ts): every SKR webhook needs the new bundle, which only a pass of
   * its Kyma gives it, so the caller wakes every Kyma it owns.
   */
  onTrustChange?: () => void;
}

export interface ReconcileContext {
  kcp: ClusterClient;
  /** KCP namespace of Kymas, templates, release metas, ModuleConfigs, SyncResources and kubeconfig Secrets. */
  namespace: string;
  logger: Logger;
  clock: () => Date;
  events: EventRecorder;
  skrClients: SkrClients;
  deletionTimeoutMs: number;
  /** Upstream's purge of a Kyma whose deletion is held up by finalizers in its SKR (kyma/purge.ts); off when undefined. */
  purge?: PurgeSettings;
  crdDir: string;
  /** The next look at a Kyma, by the state its pass ended in. */
  requeue: RequeueIntervals;
  /** The kinds and namespaces SyncResource items may touch in an SKR (SYNC_RESOURCE_ALLOWED by default). */
  syncResourcePolicy: SyncResourcePolicy;
  /** Names of the SyncResources of a Kyma from the caller's cache; a watch-cache list when it (or its answer) is undefined. */
  syncResourceNames?: (namespace: string, kyma: string) => SyncResourceNames | Promise<SyncResourceNames>;
  /**
   * Runs `work` in the mirror lane of one Module CR of the Kyma `kymaKey` (namespace/name): every read of the Module
   * CR that decides a write of its ModuleConfig, and that write, happen inside it (mirror-lanes.ts).
   */
  inMirrorLane<T>(kymaKey: string, object: MirroredObject, work: () => Promise<T>): Promise<T>;
  /** SKR webhook registration and broken-watcher detection; off when undefined. */
  registration?: RegistrationSettings;
  /** Module installation from an OCI registry (--oci-registry-host); without it no Manifests (decision 021). */
  modules?: ModuleInstallation;
  /** The controller's watch caches; each read falls back to a list from the API server's watch cache without them. */
  caches?: WatchCaches;
}

/**
 * What the controller's watches hold, for the reads of a pass that a list from the API server's watch cache served
 * before (decision 016): as fresh as that list, and every change of them enqueues the Kymas it concerns, so a pass
 * that saw an older copy is followed by one that sees the newer. Objects are as the watch delivered them (parse
 * them); undefined while a watch has not listed yet.
 */
export interface WatchCaches {
  moduleTemplates(): readonly unknown[] | undefined;
  moduleReleaseMetas(): readonly unknown[] | undefined;
  watchers(): readonly unknown[] | undefined;
  /** ModuleConfigs labelled with the Kyma's name. */
  moduleConfigs(kyma: string): readonly unknown[] | undefined;
  /** Manifests labelled with the Kyma's name (only when the controller watches Manifests). */
  manifests?(kyma: string): readonly unknown[] | undefined;
  /**
   * The KCP Kyma `namespace/name` as the controller's Kyma watch holds it (sharded: only the Kymas this replica
   * owns); undefined when the watch does not hold it (yet). A pass uses it only at a version it knows (index.ts).
   */
  kyma?(kymaKey: string): unknown;
}

export interface SyncResourcePolicy {
  /** `Kind` (core group) or `Kind.group`. */
  kinds: readonly string[];
  namespaces: readonly string[];
}

type KindName = keyof typeof KINDS;

/** Address of one of this project's custom objects. */
export function refOf(kind: KindName, namespace: string, name: string): CustomObjectRef {
  const { plural, version } = KINDS[kind];
  return { group: GROUP, version, plural, namespace, name };
}

/**
 * The objects of one kind in the KCP namespace that `labelSelector` selects: from the API server's watch cache
 * (`cached`, resourceVersion 0) or from etcd (`consistent`).
 */
export function listKcp(
  ctx: ReconcileContext,
  kind: 'moduleConfig' | 'syncResource' | 'manifest',
  labelSelector: string,
  read: 'cached' | 'consistent' = 'cached',
): Promise<unknown> {
  const { group, version, plural } = refOf(kind, ctx.namespace, '');
  return withContext(`list ${KINDS[kind].kind}s ${ctx.namespace} -l ${labelSelector}`, () =>
    ctx.kcp.custom.listNamespacedCustomObject({
      group,
      version,
      plural,
      namespace: ctx.namespace,
      labelSelector,
      ...(read === 'cached' ? { resourceVersion: '0' } : {}),
    }),
  );
}

/** Address of a KCP Kyma. */
export function refOfKyma(ctx: ReconcileContext, kyma: Kyma): CustomObjectRef {
  return refOf('kyma', kyma.metadata.namespace ?? ctx.namespace, kyma.metadata.name);
}

/** What Events about a KCP Kyma are recorded on. */
export function eventTarget(ctx: ReconcileContext, kyma: Kyma) {
  return {
    namespace: kyma.metadata.namespace ?? ctx.namespace,
    name: kyma.metadata.name,
    ...(kyma.metadata.uid ? { uid: kyma.metadata.uid } : {}),
  };
}

export function apiVersionOf(kind: KindName): string {
  return `${GROUP}/${KINDS[kind].version}`;
}

/** Upstream's tracking object of one of this project's KCP objects (`status.modules[].template`, `.manifest`). */
export function trackingOf(
  kind: KindName,
  metadata: { name: string; namespace?: string | undefined; generation?: number | undefined },
): TrackingObject {
  return {
    apiVersion: apiVersionOf(kind),
    kind: KINDS[kind].kind,
    metadata: {
      name: metadata.name,
      namespace: metadata.namespace ?? '',
      ...(metadata.generation === undefined ? {} : { generation: metadata.generation }),
    },
  };
}

/** metadata.resourceVersion of an object as the API server sent it. */
export function resourceVersionOf(object: unknown): string | undefined {
  if (!isRecord(object) || !isRecord(object['metadata'])) return undefined;
  const version = object['metadata']['resourceVersion'];
  return typeof version === 'string' ? version : undefined;
}

/** Splits a work-queue key "namespace/name". */
export function parseKymaKey(key: string, defaultNamespace: string): { namespace: string; name: string } {
  const slash = key.indexOf('/');
  const namespace = slash < 0 ? defaultNamespace : key.slice(0, slash);
  const name = slash < 0 ? key : key.slice(slash + 1);
  if (!name || !namespace || name.includes('/'))
    throw new Error(`Kyma key ${JSON.stringify(key)} is not namespace/name`);
  return { namespace, name };
}
