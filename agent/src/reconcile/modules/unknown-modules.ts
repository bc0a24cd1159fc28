// The bound on status entries of modules no catalog knows: a user may list any name in their Kyma, and the
// Kyma's status stays bounded whatever they list.
import type { KymaModuleStatus } from '@skr-watcher/api';
import { isUnknownModule } from '../status.js';
import { byCodeUnit } from '@skr-watcher/api';

/** Entries of modules no catalog knows that the Kyma's status lists by name; the rest are counted in the last. */
export const MAX_UNKNOWN_MODULE_ENTRIES = 10;

/**
 * A user may list any name in their Kyma: names no catalog knows get at most MAX_UNKNOWN_MODULE_ENTRIES entries in
 * the status (in name order), and the last of them says how many more there are, so the status stays bounded.
 */
export function boundUnknownModules(statuses: KymaModuleStatus[]): KymaModuleStatus[] {
  const unknown = statuses.filter(isUnknownModule).sort((a, b) => byCodeUnit(a.name, b.name));
  if (unknown.length <= MAX_UNKNOWN_MODULE_ENTRIES) return statuses;
  const listed = new Set(unknown.slice(0, MAX_UNKNOWN_MODULE_ENTRIES));
  const last = unknown[MAX_UNKNOWN_MODULE_ENTRIES - 1]!;
  const more = unknown.length - MAX_UNKNOWN_MODULE_ENTRIES;
  return statuses
    .filter((status) => !isUnknownModule(status) || listed.has(status))
    .map((status) =>
      status === last
        ? { ...status, message: `${status.message}; and ${more} more modules no catalog knows, not listed` }
        : status,
    );
}
