// When a leaf must be renewed or re-issued: pure decisions over an injected clock.

const DAY_MS = 24 * 3600_000;

/** A leaf is renewed with 30 days left, half its 60-day life, so one failed renewal is harmless. */
export const RENEW_BEFORE_MS = 30 * DAY_MS;

export interface LeafValidity {
  notBefore: Date;
  notAfter: Date;
}

/** True when `RENEW_BEFORE_MS` or less remains (exactly 30 days left renews). */
export function needsRenewal(leaf: Pick<LeafValidity, 'notAfter'>, now: Date): boolean {
  return leaf.notAfter.getTime() - now.getTime() <= RENEW_BEFORE_MS;
}

/**
 * True when the leaf was issued before the current CA joined the trust bundle: its Secret's `ca.crt`
 * predates that CA, so the SKR would not trust a KCP certificate signed by it. Compared in whole seconds,
 * the precision of notBefore: a leaf issued in the second the CA joined counts as issued after it.
 */
export function needsReissue(leaf: Pick<LeafValidity, 'notBefore'>, currentCaInBundleSince: Date): boolean {
  return wholeSecond(leaf.notBefore) < wholeSecond(currentCaInBundleSince);
}

function wholeSecond(date: Date): number {
  return Math.floor(date.getTime() / 1000);
}

export type LeafAction = 'none' | 'renew' | 'reissue';

export interface LeafDecision {
  action: LeafAction;
  reason: string;
}

export interface LeafPolicyContext {
  now: Date;
  /** When the CA that signs today joined the bundle; unknown means no re-issue by age. */
  currentCaInBundleSince?: Date;
  /** False when the leaf's issuer is not the CA that signs today (e.g. after a rotation switched signing). */
  signedByCurrentCa?: boolean;
}

/** The one thing a leaf needs now; re-issue wins over renewal because it also renews. */
export function decideLeaf(leaf: LeafValidity, ctx: LeafPolicyContext): LeafDecision {
  if (ctx.signedByCurrentCa === false)
    return { action: 'reissue', reason: 'signed by a CA that no longer signs' };
  if (ctx.currentCaInBundleSince && needsReissue(leaf, ctx.currentCaInBundleSince)) {
    return { action: 'reissue', reason: `issued before the current CA joined the bundle` };
  }
  if (ctx.now.getTime() >= leaf.notAfter.getTime()) return { action: 'renew', reason: 'expired' };
  if (needsRenewal(leaf, ctx.now)) {
    const days = Math.floor((leaf.notAfter.getTime() - ctx.now.getTime()) / DAY_MS);
    return { action: 'renew', reason: `${days} days left` };
  }
  return { action: 'none', reason: 'valid' };
}
