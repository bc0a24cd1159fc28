// Evaluated before anything below (imports run in order): the Node.js version check.
import './node-version.js';
export { PENDING_AFTER_MS, createModuleManager, syncResourceNameOf } from './manager.js';
export type { ModuleManager, ModuleManagerOptions } from './manager.js';
export { RenderError, itemNameOf, toSyncItems } from './render.js';
export type { Rendered, RenderedItem, RenderedObject, RenderFunction } from './render.js';
export { CONDITION_REASONS, conditionTypeOf } from './status.js';
export type { ConditionReason } from './status.js';
export { runModuleManager } from './cli.js';
export type { ModuleManagerCliOptions } from './cli.js';
export type { ModuleConfig, SyncItem, SyncStrategy } from '@skr-watcher/api';
