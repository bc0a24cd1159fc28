// Turning untyped JSON from an API server into typed values: a CRD schema can be loosened, an SKR user can
// write anything, and a bad object must fail one module or item with a message that names the field.
import type * as z from 'zod/mini';
import {
  moduleReleaseMetaSchema,
  moduleTemplateSchema,
  type ModuleReleaseMeta,
  type ModuleTemplate,
} from './catalog.js';
import { kymaSchema, type Kyma } from './kyma.js';
import { manifestSchema, type Manifest } from './manifest.js';
import {
  moduleConfigSchema,
  rawSyncResourceSchema,
  syncItemSchema,
  type ModuleConfig,
  type RawSyncResource,
  type SyncItem,
} from './mirrors.js';

export class ShapeError extends Error {
  override name = 'ShapeError';
}

/** `spec.modules[0].name` from a zod issue path. */
function fieldPath(path: readonly PropertyKey[]): string {
  return path
    .map((key, index) => (typeof key === 'number' ? `[${key}]` : `${index === 0 ? '' : '.'}${String(key)}`))
    .join('');
}

/** Parses `value` with `schema`; a mismatch throws a ShapeError naming `what` and the first bad field. */
export function parseShape<T extends z.ZodMiniType>(schema: T, value: unknown, what: string): z.output<T> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const field = issue && issue.path.length > 0 ? ` ${fieldPath(issue.path)}` : '';
  throw new ShapeError(`${what}${field}: ${issue?.message ?? 'invalid'}`, { cause: result.error });
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Items of a list answer (`{items: [...]}`), which CustomObjectsApi returns as untyped JSON. */
export function listItems(value: unknown, what: string): unknown[] {
  const items = isRecord(value) ? value['items'] : undefined;
  if (!Array.isArray(items)) throw new ShapeError(`${what}: list answer without items`);
  return items;
}

// Entry points for the kinds the agent reads: each names the object in its error, so a bad one fails one module
// or item.
export const parseKyma = (value: unknown, what: string): Kyma => parseShape(kymaSchema, value, what);

export const parseModuleTemplate = (value: unknown, what: string): ModuleTemplate =>
  parseShape(moduleTemplateSchema, value, what);

export const parseModuleReleaseMeta = (value: unknown, what: string): ModuleReleaseMeta =>
  parseShape(moduleReleaseMetaSchema, value, what);

export const parseManifest = (value: unknown, what: string): Manifest =>
  parseShape(manifestSchema, value, what);

export const parseModuleConfig = (value: unknown, what: string): ModuleConfig =>
  parseShape(moduleConfigSchema, value, what);

/** One item of a SyncResource; a bad item is reported on that item, so it is parsed on its own. */
export const parseSyncItem = (value: unknown, what: string): SyncItem =>
  parseShape(syncItemSchema, value, what);

export const parseSyncResource = (value: unknown, what: string): RawSyncResource =>
  parseShape(rawSyncResourceSchema, value, what);
