// What a module team's render function returns, and how it becomes the items of one SyncResource.
import { SYNC_STRATEGIES, type ModuleConfig, type SyncItem, type SyncStrategy } from '@skr-watcher/api';

/** An object to have in the SKR: apiVersion, kind, metadata.name (and namespace for namespaced kinds). */
export interface RenderedObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [key: string]: unknown };
  [key: string]: unknown;
}

/** An object with an explicit SyncResource strategy (the default is CreateAndSync: drift is put back). */
export interface RenderedItem {
  /** The item's name in the SyncResource; default `<kind>.<namespace>.<name>` in lower case. */
  name?: string;
  strategy: SyncStrategy;
  resource: RenderedObject;
}

export type Rendered = RenderedObject | RenderedItem;

/** The team's function: the objects one ModuleConfig (one Module CR of one SKR) asks for. Pure, may be async. */
export type RenderFunction = (config: ModuleConfig) => readonly Rendered[] | Promise<readonly Rendered[]>;

/** render returned something that cannot become a SyncResource; the message says which entry and why. */
export class RenderError extends Error {
  override readonly name = 'RenderError';
}

function isItem(entry: Rendered): entry is RenderedItem {
  return 'resource' in entry && 'strategy' in entry && typeof entry.resource === 'object';
}

function describe(index: number, resource: Partial<RenderedObject> | undefined): string {
  const name = resource?.metadata?.name;
  return `render()[${index}]${resource?.kind ? ` ${resource.kind}` : ''}${name ? ` ${name}` : ''}`;
}

/** A default item name: readable and unique per object identity within one SyncResource. */
export function itemNameOf(resource: RenderedObject): string {
  const namespace = resource.metadata.namespace;
  return [resource.kind, ...(namespace ? [namespace] : []), resource.metadata.name].join('.').toLowerCase();
}

/**
 * The SyncResource items for what render returned, as plain JSON (undefined values dropped, so that the spec read
 * back from the API server compares equal). Throws a RenderError for an entry without apiVersion, kind or name, an
 * unknown strategy, or two entries with one item name.
 */
export function toSyncItems(rendered: readonly Rendered[]): SyncItem[] {
  if (!Array.isArray(rendered)) throw new RenderError('render() must return an array of objects');
  const items: SyncItem[] = [];
  const names = new Set<string>();
  rendered.forEach((entry: Rendered | null | undefined, index) => {
    if (entry === null || typeof entry !== 'object')
      throw new RenderError(`render()[${index}] is not an object`);
    const resource = isItem(entry) ? entry.resource : entry;
    const strategy = isItem(entry) ? entry.strategy : 'CreateAndSync';
    const what = describe(index, resource);
    if (typeof resource.apiVersion !== 'string' || resource.apiVersion === '')
      throw new RenderError(`${what}: apiVersion is required`);
    if (typeof resource.kind !== 'string' || resource.kind === '')
      throw new RenderError(`${what}: kind is required`);
    if (typeof resource.metadata?.name !== 'string' || resource.metadata.name === '')
      throw new RenderError(`${what}: metadata.name is required`);
    if (!SYNC_STRATEGIES.includes(strategy))
      throw new RenderError(
        `${what}: strategy ${String(strategy)} is not one of ${SYNC_STRATEGIES.join(', ')}`,
      );
    const name = (isItem(entry) ? entry.name : undefined) ?? itemNameOf(resource);
    if (names.has(name)) throw new RenderError(`${what}: item name ${name} is used twice`);
    names.add(name);
    const json = JSON.parse(JSON.stringify(resource)) as SyncItem['resource'];
    items.push({ name, strategy, resource: json });
  });
  return items;
}
