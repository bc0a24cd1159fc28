// Objects read from API servers are checked here before they become typed values: a CRD schema can be
// loosened, an SKR user can write anything, and a bad object must fail one module or item, not the agent.
import type {
  Kyma,
  KymaModule,
  KymaSpec,
  KymaStatus,
  ModuleConfig,
  ModuleReleaseMeta,
  ModuleTemplate,
  ObjectMeta,
  ResourceState,
  SyncItem,
  SyncItemStatus,
  SyncResource,
  SyncStrategy,
} from '@skr-watcher/api';

export class ShapeError extends Error {
  override name = 'ShapeError';
}

type Json = Record<string, unknown>;

function isRecord(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function record(value: unknown, what: string): Json {
  if (!isRecord(value)) throw new ShapeError(`${what} must be an object`);
  return value;
}

function optionalString(value: unknown, what: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw new ShapeError(`${what} must be a string`);
  return value;
}

function requiredString(value: unknown, what: string): string {
  const text = optionalString(value, what);
  if (!text) throw new ShapeError(`${what} is required`);
  return text;
}

function stringMap(value: unknown, what: string): Record<string, string> | undefined {
  if (value === undefined || value === null) return undefined;
  const map = record(value, what);
  for (const [key, entry] of Object.entries(map)) {
    if (typeof entry !== 'string') throw new ShapeError(`${what}.${key} must be a string`);
  }
  return map as Record<string, string>;
}

export function parseMetadata(value: unknown, what: string): ObjectMeta {
  const metadata = record(value, `${what} metadata`);
  const finalizers = metadata['finalizers'];
  if (
    finalizers !== undefined &&
    (!Array.isArray(finalizers) || finalizers.some((f) => typeof f !== 'string'))
  ) {
    throw new ShapeError(`${what} metadata.finalizers must be a list of strings`);
  }
  const deletionTimestamp = metadata['deletionTimestamp'];
  const generation = metadata['generation'];
  return {
    name: requiredString(metadata['name'], `${what} metadata.name`),
    ...optional('namespace', optionalString(metadata['namespace'], `${what} metadata.namespace`)),
    ...optional('uid', optionalString(metadata['uid'], `${what} metadata.uid`)),
    ...optional(
      'resourceVersion',
      optionalString(metadata['resourceVersion'], `${what} metadata.resourceVersion`),
    ),
    ...optional('generation', typeof generation === 'number' ? generation : undefined),
    ...optional(
      'deletionTimestamp',
      deletionTimestamp instanceof Date
        ? deletionTimestamp.toISOString()
        : optionalString(deletionTimestamp, `${what} metadata.deletionTimestamp`),
    ),
    ...optional('labels', stringMap(metadata['labels'], `${what} metadata.labels`)),
    ...optional('annotations', stringMap(metadata['annotations'], `${what} metadata.annotations`)),
    ...optional('finalizers', finalizers as string[] | undefined),
  };
}

function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}

function parseModule(value: unknown, index: number, what: string): KymaModule {
  const module = record(value, `${what} spec.modules[${index}]`);
  const policy = module['customResourcePolicy'];
  if (policy !== undefined && policy !== 'CreateAndDelete' && policy !== 'Ignore') {
    throw new ShapeError(
      `${what} spec.modules[${index}].customResourcePolicy must be CreateAndDelete or Ignore`,
    );
  }
  return {
    name: requiredString(module['name'], `${what} spec.modules[${index}].name`),
    ...optional('channel', optionalString(module['channel'], `${what} spec.modules[${index}].channel`)),
    ...optional('version', optionalString(module['version'], `${what} spec.modules[${index}].version`)),
    ...optional('customResourcePolicy', policy as KymaModule['customResourcePolicy']),
  };
}

export function parseKymaSpec(value: unknown, what: string): KymaSpec {
  const spec = value === undefined ? {} : record(value, `${what} spec`);
  const modules = spec['modules'];
  if (modules !== undefined && modules !== null && !Array.isArray(modules)) {
    throw new ShapeError(`${what} spec.modules must be a list`);
  }
  const sync = spec['sync'] === undefined ? undefined : record(spec['sync'], `${what} spec.sync`);
  return {
    ...optional('channel', optionalString(spec['channel'], `${what} spec.channel`)),
    modules: (modules ?? []).map((module: unknown, index: number) => parseModule(module, index, what)),
    ...optional(
      'sync',
      sync && {
        ...optional('enabled', typeof sync['enabled'] === 'boolean' ? sync['enabled'] : undefined),
        ...optional('namespace', optionalString(sync['namespace'], `${what} spec.sync.namespace`)),
      },
    ),
  };
}

export function parseKyma(value: unknown, what: string): Kyma {
  const object = record(value, what);
  const status = isRecord(object['status']) ? (object['status'] as KymaStatus) : undefined;
  return {
    apiVersion: requiredString(object['apiVersion'], `${what} apiVersion`),
    kind: requiredString(object['kind'], `${what} kind`),
    metadata: parseMetadata(object['metadata'], what),
    spec: parseKymaSpec(object['spec'], what),
    ...optional('status', status),
  };
}

export function parseModuleReleaseMeta(value: unknown, what: string): ModuleReleaseMeta {
  const object = record(value, what);
  const spec = record(object['spec'], `${what} spec`);
  const channels = spec['channels'];
  if (!Array.isArray(channels)) throw new ShapeError(`${what} spec.channels must be a list`);
  return {
    apiVersion: requiredString(object['apiVersion'], `${what} apiVersion`),
    kind: requiredString(object['kind'], `${what} kind`),
    metadata: parseMetadata(object['metadata'], what),
    spec: {
      moduleName: requiredString(spec['moduleName'], `${what} spec.moduleName`),
      channels: channels.map((entry: unknown, index: number) => {
        const channel = record(entry, `${what} spec.channels[${index}]`);
        return {
          channel: requiredString(channel['channel'], `${what} spec.channels[${index}].channel`),
          version: requiredString(channel['version'], `${what} spec.channels[${index}].version`),
        };
      }),
    },
  };
}

export function parseModuleTemplate(value: unknown, what: string): ModuleTemplate {
  const object = record(value, what);
  const spec = record(object['spec'], `${what} spec`);
  const data = spec['data'] === undefined ? undefined : record(spec['data'], `${what} spec.data`);
  const dataMetadata =
    data?.['metadata'] === undefined ? {} : record(data['metadata'], `${what} spec.data.metadata`);
  const dataSpec = data?.['spec'] === undefined ? undefined : record(data['spec'], `${what} spec.data.spec`);
  return {
    apiVersion: requiredString(object['apiVersion'], `${what} apiVersion`),
    kind: requiredString(object['kind'], `${what} kind`),
    metadata: parseMetadata(object['metadata'], what),
    spec: {
      moduleName: requiredString(spec['moduleName'], `${what} spec.moduleName`),
      version: requiredString(spec['version'], `${what} spec.version`),
      ...optional(
        'data',
        data && {
          apiVersion: requiredString(data['apiVersion'], `${what} spec.data.apiVersion`),
          kind: requiredString(data['kind'], `${what} spec.data.kind`),
          metadata: {
            ...optional('name', optionalString(dataMetadata['name'], `${what} spec.data.metadata.name`)),
            ...optional(
              'namespace',
              optionalString(dataMetadata['namespace'], `${what} spec.data.metadata.namespace`),
            ),
          },
          ...optional('spec', dataSpec),
        },
      ),
    },
  };
}

export function parseModuleConfig(value: unknown, what: string): ModuleConfig {
  const object = record(value, what);
  const spec = record(object['spec'], `${what} spec`);
  const resource = record(spec['resource'], `${what} spec.resource`);
  const resourceMetadata = record(resource['metadata'], `${what} spec.resource.metadata`);
  const status = isRecord(object['status']) ? object['status'] : {};
  return {
    apiVersion: requiredString(object['apiVersion'], `${what} apiVersion`),
    kind: requiredString(object['kind'], `${what} kind`),
    metadata: parseMetadata(object['metadata'], what),
    spec: {
      kyma: requiredString(spec['kyma'], `${what} spec.kyma`),
      module: requiredString(spec['module'], `${what} spec.module`),
      resource: {
        apiVersion: requiredString(resource['apiVersion'], `${what} spec.resource.apiVersion`),
        kind: requiredString(resource['kind'], `${what} spec.resource.kind`),
        metadata: {
          name: requiredString(resourceMetadata['name'], `${what} spec.resource.metadata.name`),
          ...optional(
            'namespace',
            optionalString(resourceMetadata['namespace'], `${what} spec.resource.metadata.namespace`),
          ),
        },
        ...optional('spec', isRecord(resource['spec']) ? resource['spec'] : undefined),
      },
    },
    status: {
      ...optional('sourceResourceVersion', optionalString(status['sourceResourceVersion'], `${what} status`)),
      ...optional(
        'state',
        optionalString(status['state'], `${what} status.state`) as ResourceState | undefined,
      ),
    },
  };
}

const STRATEGIES: readonly SyncStrategy[] = ['CreateAndSync', 'CreateAndIgnore', 'Delete'];

/** One item of a SyncResource; a bad item is reported on that item, so it is parsed on its own. */
export function parseSyncItem(value: unknown, what: string): SyncItem {
  const item = record(value, what);
  const strategy = item['strategy'];
  if (!STRATEGIES.includes(strategy as SyncStrategy)) {
    throw new ShapeError(`${what}.strategy must be one of ${STRATEGIES.join(', ')}`);
  }
  const resource = record(item['resource'], `${what}.resource`);
  const metadata = record(resource['metadata'], `${what}.resource.metadata`);
  requiredString(resource['apiVersion'], `${what}.resource.apiVersion`);
  requiredString(resource['kind'], `${what}.resource.kind`);
  requiredString(metadata['name'], `${what}.resource.metadata.name`);
  optionalString(metadata['namespace'], `${what}.resource.metadata.namespace`);
  return {
    name: requiredString(item['name'], `${what}.name`),
    strategy: strategy as SyncStrategy,
    resource: resource as SyncItem['resource'],
  };
}

function parseAppliedStatus(value: unknown): SyncItemStatus['applied'] {
  if (!isRecord(value)) return undefined;
  const { apiVersion, kind, name, namespace } = value;
  if (typeof apiVersion !== 'string' || typeof kind !== 'string' || typeof name !== 'string')
    return undefined;
  return { apiVersion, kind, name, ...(typeof namespace === 'string' && namespace ? { namespace } : {}) };
}

/** A SyncResource whose items stay unparsed (`unknown`) until each is handled. */
export interface RawSyncResource extends Omit<SyncResource, 'spec'> {
  spec: { kyma: string; items: unknown[] };
}

export function parseSyncResource(value: unknown, what: string): RawSyncResource {
  const object = record(value, what);
  const spec = record(object['spec'], `${what} spec`);
  const items = spec['items'];
  if (!Array.isArray(items)) throw new ShapeError(`${what} spec.items must be a list`);
  const status = isRecord(object['status']) ? object['status'] : {};
  const statusItems = Array.isArray(status['items']) ? status['items'] : [];
  return {
    apiVersion: requiredString(object['apiVersion'], `${what} apiVersion`),
    kind: requiredString(object['kind'], `${what} kind`),
    metadata: parseMetadata(object['metadata'], what),
    spec: { kyma: requiredString(spec['kyma'], `${what} spec.kyma`), items },
    status: {
      items: statusItems.filter(isRecord).flatMap((entry): SyncItemStatus[] => {
        if (typeof entry['name'] !== 'string') return [];
        const applied = parseAppliedStatus(entry['applied']);
        const state = typeof entry['state'] === 'string' ? entry['state'] : 'Processing';
        return [
          { name: entry['name'], state: state as SyncItemStatus['state'], ...(applied ? { applied } : {}) },
        ];
      }),
    },
  };
}

/** Items of a list answer (`{items: [...]}`) from CustomObjectsApi, which returns untyped JSON. */
export function listItems(value: unknown, what: string): unknown[] {
  const items = record(value, what)['items'];
  if (!Array.isArray(items)) throw new ShapeError(`${what}: list answer without items`);
  return items;
}

export { isRecord };
