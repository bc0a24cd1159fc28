// Shapes of the custom resources (DESIGN 3). Only the fields this project reads or writes are typed.

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
}

export interface TypedObject<Spec, Status = unknown> {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec: Spec;
  status?: Status;
}

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

export interface LastOperation {
  operation: string;
  lastUpdateTime: string;
}

export type ResourceState = 'Ready' | 'Processing' | 'Warning' | 'Error' | 'Deleting';

// Kyma

export interface KymaModule {
  name: string;
  channel?: string;
  version?: string;
  customResourcePolicy?: 'CreateAndDelete' | 'Ignore';
}

export interface KymaSpec {
  channel?: string;
  modules?: KymaModule[];
  sync?: { enabled?: boolean; namespace?: string; moduleCatalog?: boolean };
}

export interface KymaModuleStatus {
  name: string;
  channel?: string;
  version?: string;
  template?: string;
  state: ResourceState;
  message?: string;
  resource?: GroupVersionKind & { name: string; namespace?: string };
}

export interface KymaStatus {
  state?: ResourceState;
  conditions?: Condition[];
  modules?: KymaModuleStatus[];
  lastOperation?: LastOperation;
}

export type Kyma = TypedObject<KymaSpec, KymaStatus>;

// ModuleTemplate and ModuleReleaseMeta

export interface ModuleTemplateSpec {
  moduleName: string;
  version: string;
  /** The default Module CR of this module version; its apiVersion and kind name the Module CR type. */
  data?: { apiVersion: string; kind: string; metadata?: Partial<ObjectMeta>; spec?: Record<string, unknown> };
  channel?: string;
}
export type ModuleTemplate = TypedObject<ModuleTemplateSpec>;

export interface ModuleReleaseMetaSpec {
  moduleName: string;
  channels: { channel: string; version: string }[];
}
export type ModuleReleaseMeta = TypedObject<ModuleReleaseMetaSpec>;

// Watcher

export interface WatcherSpec {
  manager: string;
  labelsToWatch?: Record<string, string>;
  resourceToWatch: { group: string; version: string; resource: string };
  field: 'spec' | 'status';
  serviceInfo?: { name: string; port: number; namespace: string };
  gateway?: { selector?: { matchLabels?: Record<string, string> } };
}
export type Watcher = TypedObject<WatcherSpec>;

// ModuleConfig

export interface MirroredResource {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  spec?: Record<string, unknown>;
}

export interface ModuleConfigSpec {
  kyma: string;
  module: string;
  resource: MirroredResource;
}

export interface ModuleConfigStatus {
  state?: ResourceState;
  conditions?: Condition[];
  lastOperation?: LastOperation;
  observedGeneration?: number;
  /** resourceVersion of the Module CR in the SKR that this mirror was taken from. */
  sourceResourceVersion?: string;
}
export type ModuleConfig = TypedObject<ModuleConfigSpec, ModuleConfigStatus>;

// SyncResource

export type SyncStrategy = 'CreateAndSync' | 'CreateAndIgnore' | 'Delete';

export interface SyncItem {
  name: string;
  strategy: SyncStrategy;
  resource: { apiVersion: string; kind: string; metadata: Partial<ObjectMeta> & { name: string } } & Record<
    string,
    unknown
  >;
}

export interface SyncItemStatus {
  name: string;
  state: ResourceState;
  message?: string;
  /** Identity of what was applied, so that items dropped from the spec can be removed from the SKR. */
  applied?: { apiVersion: string; kind: string; name: string; namespace?: string };
}

export interface SyncResourceSpec {
  kyma: string;
  items: SyncItem[];
}

export interface SyncResourceStatus {
  state?: ResourceState;
  conditions?: Condition[];
  lastOperation?: LastOperation;
  observedGeneration?: number;
  items?: SyncItemStatus[];
}
export type SyncResource = TypedObject<SyncResourceSpec, SyncResourceStatus>;

// Shared identifiers

export interface GroupVersionKind {
  group: string;
  version: string;
  kind: string;
}

export interface GroupVersionResource {
  group: string;
  version: string;
  resource: string;
}

/** `group/version`, or `version` for the core group. */
export function apiVersionOf(gv: { group: string; version: string }): string {
  return gv.group === '' ? gv.version : `${gv.group}/${gv.version}`;
}

/** Splits an apiVersion into its group (empty for core) and version. */
export function splitApiVersion(apiVersion: string): { group: string; version: string } {
  const slash = apiVersion.indexOf('/');
  return slash < 0
    ? { group: '', version: apiVersion }
    : { group: apiVersion.slice(0, slash), version: apiVersion.slice(slash + 1) };
}
