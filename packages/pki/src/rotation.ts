// CA rotation as a resumable state machine: the state lives in Secret annotations, the decisions are pure.
//
//   none/complete --start--> new-ca-pending --trust--> new-ca-trusted --(propagation passed)--reissue-->
//     leaves-reissued --switch--> signing-switched --(stragglers re-issued, grace passed)--> complete
//
// Every step is idempotent, so a run that crashed after doing a step but before recording it repeats it.
import type { CertificateAndKey } from './ca.js';

export const ROTATION_PHASES = [
  'none',
  'new-ca-pending',
  'new-ca-trusted',
  'leaves-reissued',
  'signing-switched',
  'complete',
] as const;
export type RotationPhase = (typeof ROTATION_PHASES)[number];

export interface RotationState {
  phase: RotationPhase;
  startedAt?: Date;
  trustedAt?: Date;
  /** Last time leaves were re-issued (again after the switch when stragglers were found). */
  reissuedAt?: Date;
  switchedAt?: Date;
  completedAt?: Date;
}

const PREFIX = 'operator.kyma-project.io/ca-rotation-';

/** Annotations on the CA Secret (`skr-watcher-ca`) that persist the rotation. */
export const ROTATION_ANNOTATIONS = {
  phase: `${PREFIX}phase`,
  startedAt: `${PREFIX}started-at`,
  trustedAt: `${PREFIX}trusted-at`,
  reissuedAt: `${PREFIX}reissued-at`,
  switchedAt: `${PREFIX}switched-at`,
  completedAt: `${PREFIX}completed-at`,
} as const;

/** On the CA Secret: when the CA that signs today joined the trust bundle (input of `needsReissue`). */
export const CA_IN_BUNDLE_SINCE_ANNOTATION = 'operator.kyma-project.io/ca-in-bundle-since';

const TIMESTAMP_KEYS = ['startedAt', 'trustedAt', 'reissuedAt', 'switchedAt', 'completedAt'] as const;

export function rotationStateFromAnnotations(annotations: Record<string, string> | undefined): RotationState {
  const phase = annotations?.[ROTATION_ANNOTATIONS.phase] ?? 'none';
  if (!(ROTATION_PHASES as readonly string[]).includes(phase)) {
    throw new Error(
      `annotation ${ROTATION_ANNOTATIONS.phase}: unknown rotation phase ${JSON.stringify(phase)}`,
    );
  }
  const state: RotationState = { phase: phase as RotationPhase };
  for (const key of TIMESTAMP_KEYS) {
    const raw = annotations?.[ROTATION_ANNOTATIONS[key]];
    if (raw !== undefined) state[key] = parseTimestamp(raw, ROTATION_ANNOTATIONS[key]);
  }
  return state;
}

export function rotationStateToAnnotations(state: RotationState): Record<string, string | null> {
  const annotations: Record<string, string | null> = { [ROTATION_ANNOTATIONS.phase]: state.phase };
  // null removes a stale annotation in a merge patch.
  for (const key of TIMESTAMP_KEYS)
    annotations[ROTATION_ANNOTATIONS[key]] = state[key]?.toISOString() ?? null;
  return annotations;
}

export function parseTimestamp(raw: string, what: string): Date {
  const date = new Date(raw);
  if (!/^\d{4}-\d{2}-\d{2}T/.test(raw) || Number.isNaN(date.getTime())) {
    throw new Error(`${what}: not an RFC 3339 timestamp: ${JSON.stringify(raw)}`);
  }
  return date;
}

export type RotationStep =
  | { kind: 'start' }
  | { kind: 'trust-new-ca' }
  | { kind: 'reissue-leaves' }
  | { kind: 'switch-signing' }
  /** Nothing to do before `until`: the new CA is still propagating, or the grace period runs. */
  | { kind: 'wait'; until: Date; for: 'propagation' | 'grace-period' }
  | { kind: 'drop-old-ca' }
  | { kind: 'done' };

export interface RotationContext {
  now: Date;
  /** How long leaves signed by the new CA must have been out before the old CA is distrusted. */
  gracePeriodMs: number;
  /**
   * How long the new CA must have been in the trust bundle before any leaf is signed by it: every holder of the
   * bundle (the KCP listener, each SKR webhook) loads it through a Secret volume, which kubelet syncs every
   * 60-90 s, and a client certificate from a CA the other side has not loaded yet is rejected. Default 0.
   */
  propagationMs?: number;
  /** Leaves not yet signed by the CA that will sign after the rotation (pending CA before the switch). */
  leavesOnOldCa: number;
  /** Start another rotation when the last one is complete (otherwise a complete rotation is done). */
  startNew?: boolean;
}

export function nextRotationStep(state: RotationState, ctx: RotationContext): RotationStep {
  switch (state.phase) {
    case 'none':
      return { kind: 'start' };
    case 'complete':
      return ctx.startNew ? { kind: 'start' } : { kind: 'done' };
    case 'new-ca-pending':
      return { kind: 'trust-new-ca' };
    case 'new-ca-trusted': {
      const until = new Date((state.trustedAt?.getTime() ?? 0) + (ctx.propagationMs ?? 0));
      return ctx.now.getTime() < until.getTime()
        ? { kind: 'wait', until, for: 'propagation' }
        : { kind: 'reissue-leaves' };
    }
    case 'leaves-reissued':
      return { kind: 'switch-signing' };
    case 'signing-switched': {
      // Leaves issued with the old CA between re-issue and switch must move before the old CA goes.
      if (ctx.leavesOnOldCa > 0) return { kind: 'reissue-leaves' };
      const since = Math.max(state.switchedAt?.getTime() ?? 0, state.reissuedAt?.getTime() ?? 0);
      const until = new Date(since + ctx.gracePeriodMs);
      return ctx.now.getTime() < until.getTime()
        ? { kind: 'wait', until, for: 'grace-period' }
        : { kind: 'drop-old-ca' };
    }
  }
}

/** The state after `step` was carried out at `now`. */
export function applyRotationStep(state: RotationState, step: RotationStep, now: Date): RotationState {
  switch (step.kind) {
    case 'start':
      return { phase: 'new-ca-pending', startedAt: now };
    case 'trust-new-ca':
      return { ...state, phase: 'new-ca-trusted', trustedAt: now };
    case 'reissue-leaves':
      return {
        ...state,
        phase: state.phase === 'signing-switched' ? 'signing-switched' : 'leaves-reissued',
        reissuedAt: now,
      };
    case 'switch-signing':
      return { ...state, phase: 'signing-switched', switchedAt: now };
    case 'drop-old-ca':
      return { ...state, phase: 'complete', completedAt: now };
    case 'wait':
    case 'done':
      return state;
  }
}

/** The CA material a signing decision looks at (the CA Secret, as read). */
export interface CaGenerations {
  current: CertificateAndKey;
  /** The CA a rotation is introducing (phase new-ca-pending .. leaves-reissued). */
  pending?: CertificateAndKey;
  annotations?: Record<string, string>;
}

/**
 * The CA that signs leaves at this rotation phase: the pending one only once rotate-ca re-issued the leaves
 * (phase leaves-reissued), which it does after the new CA has been in the bundle for the propagation delay, so no
 * SKR presents a certificate the listener cannot verify yet; otherwise the current one.
 */
export function signingCaFor(
  ca: CaGenerations,
  state: RotationState = rotationStateFromAnnotations(ca.annotations),
): CertificateAndKey {
  if (state.phase === 'leaves-reissued' && ca.pending) return ca.pending;
  return ca.current;
}
