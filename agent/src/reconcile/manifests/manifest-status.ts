// The Manifest's status as this controller writes it: upstream's conditions (each kept True once it turned True), the
// Ownership condition when objects were refused or adopted, and a write only when a reader would see a change.
import { isDeepStrictEqual } from 'node:util';
import {
  KINDS,
  MANIFEST,
  MANIFEST_CONDITIONS,
  parseManifest,
  type Condition,
  type Manifest,
  type ManifestStatus,
  type SyncedObject,
} from '@skr-watcher/api';
import { applyCustomStatus, type MemberResult } from '@skr-watcher/kube';
import { apiVersionOf } from '../context.js';
import { conditionsFor } from '../status.js';
import { conditionTrue, hasDefaultCr, refOfManifest, type ManifestStore } from './manifest.js';

/** What the status writer needs: the Manifest's store and the time the conditions are stamped with. */
export interface StatusWriter extends ManifestStore {
  clock: () => Date;
}

export interface StatusInput {
  state: NonNullable<ManifestStatus['state']>;
  operation: string;
  synced: SyncedObject[];
  resources?: boolean;
  installation?: boolean;
  moduleCr?: boolean;
  /** Objects refused (held by another) or adopted in this pass: the Ownership condition, present only then. */
  holding?: readonly MemberResult[];
}

const OWNERSHIP_CONDITION = 'Ownership';

/** The Ownership condition: False naming the holders of what was refused, True naming what was adopted. */
function ownershipCondition(results: readonly MemberResult[]) {
  const refused = results.filter((result) => result.outcome === 'refused');
  const adopted = results.filter((result) => result.outcome === 'adopted');
  if (refused.length === 0 && adopted.length === 0) return undefined;
  const list = (members: readonly MemberResult[]) =>
    members
      .slice(0, 5)
      .map((member) => member.message)
      .join('; ') + (members.length > 5 ? `; and ${members.length - 5} more` : '');
  return refused.length > 0
    ? { type: OWNERSHIP_CONDITION, ok: false, reason: 'HeldByAnother', message: list(refused) }
    : { type: OWNERSHIP_CONDITION, ok: true, reason: 'Adopted', message: list(adopted) };
}

/** Upstream's conditions, each kept True once it turned True. */
function manifestConditions(now: Date, manifest: Manifest, input: StatusInput): Condition[] {
  const { resources, installation, moduleCr } = MANIFEST_CONDITIONS;
  const entries: [typeof resources | typeof installation | typeof moduleCr, boolean | undefined][] = [
    [resources, input.resources],
    [installation, input.installation],
    ...(hasDefaultCr(manifest) && manifest.spec.customResourcePolicy !== 'Ignore'
      ? ([[moduleCr, input.moduleCr]] as [typeof moduleCr, boolean | undefined][])
      : []),
  ];
  const ownership = input.holding ? ownershipCondition(input.holding) : undefined;
  return conditionsFor(
    [
      ...entries.map(([condition, ok]) => {
        const on = ok ?? conditionTrue(manifest, condition.type);
        return {
          type: condition.type,
          ok: on,
          reason: condition.reason,
          message: on ? condition.trueMessage : condition.falseMessage,
        };
      }),
      ...(ownership ? [ownership] : []),
    ],
    manifest.status?.conditions,
    now,
    undefined,
  );
}

/** What a reader compares: state, operation, synced and each condition's value and message. */
function comparable(status: ManifestStatus | undefined) {
  return {
    state: status?.state ?? '',
    operation: status?.lastOperation?.operation,
    synced: status?.synced ?? [],
    conditions: (status?.conditions ?? []).map(({ type, status: value, message }) => ({
      type,
      value,
      message,
    })),
  };
}

/** Writes the status when a reader would see a change (state, operation, conditions, synced); answers the Manifest. */
export async function writeStatus(
  ctx: StatusWriter,
  manifest: Manifest,
  input: StatusInput,
): Promise<Manifest> {
  const conditions = manifestConditions(ctx.clock(), manifest, input);
  const status: ManifestStatus = {
    state: input.state,
    lastOperation: { operation: input.operation, lastUpdateTime: ctx.clock().toISOString() },
    conditions,
    synced: input.synced,
  };
  if (isDeepStrictEqual(comparable(manifest.status), comparable(status))) return manifest;
  const written = await applyCustomStatus(
    ctx.kcp.custom,
    refOfManifest(manifest),
    {
      apiVersion: apiVersionOf('manifest'),
      kind: KINDS.manifest.kind,
      metadata: { name: manifest.metadata.name, namespace: manifest.metadata.namespace },
      status,
    },
    { fieldManager: MANIFEST.applyFieldManager, force: true },
  );
  return parseManifest(written, `Manifest ${manifest.metadata.name}`);
}
