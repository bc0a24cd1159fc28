// Drift of installed module objects: writes of objects labelled `managed-by: kyma` reach the webhook
// through one label-selected rule. Only a change the agent would put back wakes KCP; the agent's own applies and
// the churn of controllers (status, volatile metadata, annotations they rewrite) do not.
import { DRIFT, GROUP, KINDS, LABELS, type AdmissionRequest, type EmbeddedObject } from '@skr-watcher/api';
import { sameJson } from './same-json.js';

/** drift: KCP must hear about it; own-write: the agent's apply; churn: nothing the agent applies changed. */
export type DriftVerdict = 'drift' | 'own-write' | 'churn';

/** Metadata the API server or controllers change on writes that leave the object as installed. */
const VOLATILE_METADATA = new Set(['resourceVersion', 'managedFields', 'generation']);
const CHURNED_ANNOTATIONS = new Set(DRIFT.churnedAnnotations);
const AGENT_FIELD_MANAGERS = new Set(DRIFT.agentFieldManagers);

function record(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

function carriesInstalledLabel(object: EmbeddedObject | null | undefined): boolean {
  return record(object?.metadata?.['labels'])?.[LABELS.managedBy] === DRIFT.managedByValue;
}

/**
 * The SKR Kyma carries `managed-by: kyma` because upstream labels it so (decision 027), yet no module installed it:
 * the user edits it and the Watchers' rules decide on its writes, status writes included.
 */
function isKyma(request: AdmissionRequest): boolean {
  return request.kind.group === GROUP && request.kind.kind === KINDS.kyma.kind;
}

/** Whether the write is about an object a module installed (the label on either side: removing it is drift too). */
export function isInstalledObject(request: AdmissionRequest): boolean {
  if (isKyma(request)) return false;
  return carriesInstalledLabel(request.object) || carriesInstalledLabel(request.oldObject);
}

/** The field manager the write names (create, update, patch and apply options carry it; delete options do not). */
function fieldManagerOf(request: AdmissionRequest): string | undefined {
  const manager = record(request.options)?.['fieldManager'];
  return typeof manager === 'string' ? manager : undefined;
}

export function driftVerdict(request: AdmissionRequest): DriftVerdict {
  const manager = fieldManagerOf(request);
  if (manager !== undefined && AGENT_FIELD_MANAGERS.has(manager)) return 'own-write';
  if (request.operation === 'CONNECT') return 'churn';
  if (request.operation !== 'UPDATE') return 'drift';
  // Status and other subresources are written by controllers; the agent applies none of them.
  if (request.subResource) return 'churn';
  const { object, oldObject } = request;
  // Without both sides there is nothing to compare: tell KCP rather than risk losing a change.
  if (!object || !oldObject) return 'drift';
  return sameJson(installedView(object), installedView(oldObject)) ? 'churn' : 'drift';
}

/** The object without what a revert would never touch: status, volatile metadata, churned annotations. */
function installedView(object: EmbeddedObject): Record<string, unknown> {
  const rest: Record<string, unknown> = { ...object };
  delete rest['status'];
  const kept: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(record(object.metadata) ?? {})) {
    if (VOLATILE_METADATA.has(key)) continue;
    if (key === 'annotations' && record(value)) {
      const annotations = Object.entries(record(value)!).filter(([name]) => !CHURNED_ANNOTATIONS.has(name));
      if (annotations.length > 0) kept[key] = Object.fromEntries(annotations);
      continue;
    }
    kept[key] = value;
  }
  return { ...rest, metadata: kept };
}
