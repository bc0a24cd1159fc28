// Objects read from API servers become typed values only through the schemas of @skr-watcher/api; these are
// the agent's entry points, each naming the object in its error so a bad one fails one module or item.
import {
  kymaSchema,
  moduleConfigSchema,
  moduleReleaseMetaSchema,
  moduleTemplateSchema,
  parseShape,
  rawSyncResourceSchema,
  syncItemSchema,
  watcherSchema,
  type Kyma,
  type ModuleConfig,
  type ModuleReleaseMeta,
  type ModuleTemplate,
  type RawSyncResource,
  type SyncItem,
  type Watcher,
} from '@skr-watcher/api';

export { isRecord, listItems, ShapeError, type RawSyncResource } from '@skr-watcher/api';

export const parseKyma = (value: unknown, what: string): Kyma => parseShape(kymaSchema, value, what);

export const parseModuleTemplate = (value: unknown, what: string): ModuleTemplate =>
  parseShape(moduleTemplateSchema, value, what);

export const parseModuleReleaseMeta = (value: unknown, what: string): ModuleReleaseMeta =>
  parseShape(moduleReleaseMetaSchema, value, what);

export const parseWatcher = (value: unknown, what: string): Watcher => parseShape(watcherSchema, value, what);

export const parseModuleConfig = (value: unknown, what: string): ModuleConfig =>
  parseShape(moduleConfigSchema, value, what);

/** One item of a SyncResource; a bad item is reported on that item, so it is parsed on its own. */
export const parseSyncItem = (value: unknown, what: string): SyncItem =>
  parseShape(syncItemSchema, value, what);

export const parseSyncResource = (value: unknown, what: string): RawSyncResource =>
  parseShape(rawSyncResourceSchema, value, what);
