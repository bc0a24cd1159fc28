// A module's state from its default CR, by `ModuleTemplate.spec.customStateCheck` with the rules upstream applied until
// it dropped the field (notes: module-installation.md §3.4): each check reads one field (`status.health`, a dotted
// path) and compares it, as a string, with `value`; the checks of one mapped state must all hold; Ready and Error
// must both be mapped; when several states hold, Error wins, then Ready, Warning, Deleting; none holds → Processing,
// and Warning once the CR has shown no known state for 5 minutes. Pure: the clock is an argument.
import type { ModuleState } from '@skr-watcher/api';

export interface StateCheck {
  jsonPath: string;
  value: string;
  mappedState: ModuleState | '';
}

/** What the module's default CR says, mapped; `reason` says which check decided. */
export interface CheckedState {
  state: ModuleState;
  reason: string;
}

const PRIORITY: readonly ModuleState[] = ['Error', 'Ready', 'Warning', 'Deleting'];
/** Without customStateCheck, upstream read `status.state` for these. */
const DEFAULT_CHECKS: readonly StateCheck[] = PRIORITY.map((state) => ({
  jsonPath: 'status.state',
  value: state,
  mappedState: state,
}));
export const UNKNOWN_STATE_GRACE_MS = 5 * 60_000;
const MAX_PATH_SEGMENTS = 32;

export class StateCheckError extends Error {
  override name = 'StateCheckError';
}

const MAX_CHECKS = 100;
const STATES: readonly string[] = [...PRIORITY, 'Processing', ''];

/** The checks from their JSON (a Manifest annotation): an array of {jsonPath, value, mappedState}, bounded. */
export function parseStateChecks(text: string): StateCheck[] {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new StateCheckError('customStateCheck is not JSON');
  }
  if (!Array.isArray(json) || json.length > MAX_CHECKS)
    throw new StateCheckError(`customStateCheck must be a list of at most ${MAX_CHECKS} checks`);
  return json.map((entry: unknown, i) => {
    const check = entry as Partial<Record<keyof StateCheck, unknown>> | null;
    if (
      !check ||
      typeof check.jsonPath !== 'string' ||
      typeof check.value !== 'string' ||
      typeof check.mappedState !== 'string' ||
      !STATES.includes(check.mappedState)
    )
      throw new StateCheckError(`customStateCheck[${i}] is not {jsonPath, value, mappedState}`);
    return check as StateCheck;
  });
}

/** Refuses a customStateCheck that cannot decide: Ready and Error mapped, paths readable. */
export function validateStateChecks(checks: readonly StateCheck[]): void {
  for (const needed of ['Ready', 'Error'] as const)
    if (!checks.some((check) => check.mappedState === needed))
      throw new StateCheckError(
        `customStateCheck maps nothing to ${needed}; both Ready and Error are required`,
      );
  for (const check of checks) segments(check.jsonPath);
}

function segments(jsonPath: string): string[] {
  const parts = jsonPath.replace(/^\.|^\$\./, '').split('.');
  if (parts.length > MAX_PATH_SEGMENTS || parts.some((part) => part === ''))
    throw new StateCheckError(
      `customStateCheck path "${jsonPath}" is not a dotted field path like status.state`,
    );
  return parts;
}

/** The field at a dotted path as a string (numbers and booleans as they print), or undefined. */
function read(object: unknown, jsonPath: string): string | undefined {
  let node = object;
  for (const part of segments(jsonPath)) {
    if (node === null || typeof node !== 'object' || Array.isArray(node)) return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  if (typeof node === 'string') return node;
  if (typeof node === 'number' || typeof node === 'boolean') return String(node);
  return undefined;
}

/**
 * The module's state from its default CR. `checks` absent or empty: `status.state` as upstream read it.
 * `unknownSince` is when the CR was first seen without a known state (the caller keeps it).
 */
export function checkState(
  cr: unknown,
  checks: readonly StateCheck[] | undefined,
  now: Date,
  unknownSince: Date | undefined,
): CheckedState {
  const custom = checks && checks.length > 0;
  if (custom) validateStateChecks(checks);
  const used = custom ? checks : DEFAULT_CHECKS;
  for (const state of PRIORITY) {
    const mine = used.filter((check) => check.mappedState === state);
    if (mine.length > 0 && mine.every((check) => read(cr, check.jsonPath) === check.value))
      return {
        state,
        reason: mine.map((check) => `${check.jsonPath} is "${check.value}"`).join(' and '),
      };
  }
  const waited = unknownSince ? now.getTime() - unknownSince.getTime() : 0;
  if (waited >= UNKNOWN_STATE_GRACE_MS)
    return { state: 'Warning', reason: `no mapped state for ${Math.round(waited / 60_000)} min` };
  return { state: 'Processing', reason: 'no mapped state yet' };
}
