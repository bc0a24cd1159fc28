// Runs or resumes the phased CA rotation against the KCP Secrets; the decisions come from @skr-watcher/pki.
import {
  addToBundle,
  applyRotationStep,
  createCa,
  describeCertificate,
  dropExpired,
  isSignedBy,
  issueLeaf,
  nextRotationStep,
  removeFromBundle,
  rotationStateFromAnnotations,
  rotationStateToAnnotations,
  CA_IN_BUNDLE_SINCE_ANNOTATION,
  type CertificateAndKey,
  type RotationState,
  type RotationStep,
  type RsaKeyBits,
  signingCaFor,
} from '@skr-watcher/pki';
import { type CaSecret, type KcpPkiSecrets, type LeafSecret } from '@skr-watcher/kube';

export interface RotateCaOptions {
  gracePeriodMs: number;
  /** How long the new CA stays in the bundle before leaves are signed by it (Secret volume sync). */
  propagationMs: number;
  /** Start another rotation when the last one completed. */
  startNew: boolean;
  dryRun: boolean;
  /** Stop after this many steps (operators who want to watch each phase). */
  maxSteps: number;
  /** Sleep through the propagation delay and the grace period instead of stopping there. */
  wait: boolean;
  caCommonName: string;
  caKeyBits: RsaKeyBits;
  caValidityDays?: number;
  now: () => Date;
  sleep: (ms: number) => Promise<void>;
  progress: (message: string) => void;
}

export interface RotationStepRecord {
  step: RotationStep['kind'];
  phase: RotationState['phase'];
  detail: string;
  at: Date;
}

export interface RotationReport {
  dryRun: boolean;
  steps: RotationStepRecord[];
  state: RotationState;
  /** Set when the run stopped in the propagation delay or the grace period. */
  waitingUntil?: Date;
  waitingFor?: 'propagation' | 'grace-period';
}

function leafUpToDate(leaf: LeafSecret, signer: CertificateAndKey, bundlePem: string): boolean {
  return leaf.caPem === bundlePem && isSignedBy(leaf.certPem, signer.certPem);
}

export async function rotateCa(secrets: KcpPkiSecrets, opts: RotateCaOptions): Promise<RotationReport> {
  const steps: RotationStepRecord[] = [];
  let simulated: RotationState | undefined;
  // A dry run plans past the propagation delay as if it had passed.
  let plannedAheadMs = 0;
  for (;;) {
    const ca = await secrets.readCa();
    if (ca === undefined) {
      throw new Error(
        `Secret ${secrets.namespace}/skr-watcher-ca not found; create the CA with init-ca first`,
      );
    }
    const state = simulated ?? rotationStateFromAnnotations(ca.annotations);
    const bundlePem = (await secrets.readBundle()) ?? '';
    const leaves = await secrets.listLeaves();
    const stale = simulated
      ? []
      : leaves.filter((leaf) => !isSignedBy(leaf.certPem, signingCaFor(ca, state).certPem));
    const now = new Date(opts.now().getTime() + plannedAheadMs);
    const step = nextRotationStep(state, {
      now,
      gracePeriodMs: opts.gracePeriodMs,
      propagationMs: opts.propagationMs,
      leavesOnOldCa: stale.length,
      startNew: opts.startNew && steps.length === 0,
    });

    if (step.kind === 'done') return { dryRun: opts.dryRun, steps, state };
    if (step.kind === 'wait') {
      const stopped = { dryRun: opts.dryRun, steps, state, waitingUntil: step.until, waitingFor: step.for };
      const what = step.for === 'propagation' ? 'the new CA propagates' : 'the grace period runs';
      if (opts.dryRun && step.for === 'propagation') {
        opts.progress(`plan: wait while ${what}, until ${step.until.toISOString()}`);
        plannedAheadMs += step.until.getTime() - now.getTime();
        continue;
      }
      if (!opts.wait) {
        opts.progress(`${what} until ${step.until.toISOString()}; run rotate-ca again after that`);
        return stopped;
      }
      if (steps.length >= opts.maxSteps) return { dryRun: opts.dryRun, steps, state };
      opts.progress(`waiting while ${what}, until ${step.until.toISOString()}`);
      if (opts.dryRun) return stopped;
      await opts.sleep(Math.max(0, step.until.getTime() - now.getTime()));
      continue;
    }
    if (steps.length >= opts.maxSteps) return { dryRun: opts.dryRun, steps, state };

    const next = applyRotationStep(state, step, now);
    // Signed as the state after the step signs: re-issuing moves the leaves to the pending CA.
    const signer = signingCaFor(ca, next);
    const detail = opts.dryRun
      ? plannedDetail(step, leaves.length)
      : await carryOut(secrets, { step, ca, state: next, bundlePem, leaves, signer, opts, now });
    steps.push({ step: step.kind, phase: next.phase, detail, at: now });
    opts.progress(`${opts.dryRun ? 'plan: ' : ''}${step.kind}: ${detail} (phase ${next.phase})`);
    if (opts.dryRun) simulated = next;
    if (opts.dryRun && step.kind === 'drop-old-ca') return { dryRun: true, steps, state: next };
  }
}

function plannedDetail(step: RotationStep, leafCount: number): string {
  switch (step.kind) {
    case 'start':
      return 'generate a new CA and store it as pending in the CA Secret';
    case 'trust-new-ca':
      return 'add the new CA to the trust bundle and to every leaf ca.crt';
    case 'reissue-leaves':
      return `re-issue up to ${leafCount} SKR leaves with the new CA and the new bundle`;
    case 'switch-signing':
      return 'make the new CA the signing CA';
    case 'drop-old-ca':
      return 'remove the old CA from the bundle and from every SKR ca.crt';
    default:
      return step.kind;
  }
}

interface StepInput {
  step: RotationStep;
  ca: CaSecret;
  /** The state to record once the step is done. */
  state: RotationState;
  bundlePem: string;
  leaves: LeafSecret[];
  /** The CA that signs in the state after the step. */
  signer: CertificateAndKey;
  opts: RotateCaOptions;
  now: Date;
}

async function carryOut(secrets: KcpPkiSecrets, input: StepInput): Promise<string> {
  const { step, ca, state, opts, now } = input;
  const annotations = rotationStateToAnnotations(state);
  switch (step.kind) {
    case 'start': {
      const stamp = now
        .toISOString()
        .replace(/[-:]/g, '')
        .replace(/\.\d+Z$/, 'Z');
      const pending = createCa({
        commonName: `${opts.caCommonName}-${stamp}`.slice(0, 64),
        keyBits: opts.caKeyBits,
        validityDays: opts.caValidityDays,
        now,
      });
      await secrets.writeCa(ca, { current: ca.current, pending, previousCertPem: undefined }, annotations);
      return `new CA ${describeCertificate(pending.certPem).commonName} pending`;
    }
    case 'trust-new-ca': {
      const pending = requirePending(ca, secrets);
      const bundlePem = addToBundle(addToBundle(input.bundlePem, ca.current.certPem), pending.certPem);
      await secrets.writeBundle(bundlePem);
      // Each leaf Secret's ca.crt follows at once: the agent copies the bundle into the SKRs when one changes, so
      // the SKR webhooks load the new CA during the propagation delay too (they verify the listener with it).
      for (const leaf of input.leaves) {
        if (leaf.caPem !== bundlePem) await secrets.writeLeafBundle(leaf, bundlePem);
      }
      await secrets.writeCa(ca, ca, annotations);
      return `bundle and ${input.leaves.length} leaf ca.crt now hold ${describeCertificate(pending.certPem).commonName}`;
    }
    case 'reissue-leaves': {
      let count = 0;
      for (const leaf of input.leaves) {
        if (leafUpToDate(leaf, input.signer, input.bundlePem)) continue;
        // The listener's certificate moves only once the new CA signs: SKR webhooks verify it, and until the
        // switch some may not yet hold the new CA. Before the old CA goes it is a straggler like any other.
        if (leaf.kymaName === '' && state.phase !== 'signing-switched') continue;
        const info = describeCertificate(leaf.certPem);
        const reissued = issueLeaf({
          ca: input.signer,
          // The listener's leaf keeps (or, if an older one lacks it, takes) the listener's reserved CN.
          ...(leaf.kymaName === '' ? { role: 'listener' as const } : { runtimeId: info.commonName }),
          dnsNames: info.dnsNames,
          ipAddresses: info.ipAddresses,
          keyBits: info.keyBits === 3072 || info.keyBits === 4096 ? info.keyBits : 2048,
          now,
        });
        await secrets.rewriteLeaf(leaf, reissued, input.bundlePem);
        count++;
        opts.progress(`re-issued ${leaf.name} (runtime ${info.commonName})`);
      }
      await secrets.writeCa(ca, ca, annotations);
      return `${count} of ${input.leaves.length} leaves re-issued`;
    }
    case 'switch-signing': {
      const pending = requirePending(ca, secrets);
      await secrets.writeCa(
        ca,
        { current: pending, pending: undefined, previousCertPem: ca.current.certPem },
        { ...annotations, [CA_IN_BUNDLE_SINCE_ANNOTATION]: (state.trustedAt ?? now).toISOString() },
      );
      return `signing with ${describeCertificate(pending.certPem).commonName}`;
    }
    case 'drop-old-ca': {
      let bundlePem = input.bundlePem;
      if (ca.previousCertPem) bundlePem = removeFromBundle(bundlePem, ca.previousCertPem);
      bundlePem = addToBundle(dropExpired(bundlePem, now).bundlePem, ca.current.certPem);
      await secrets.writeBundle(bundlePem);
      for (const leaf of input.leaves) {
        if (leaf.caPem !== bundlePem) await secrets.writeLeafBundle(leaf, bundlePem);
      }
      await secrets.writeCa(
        ca,
        { current: ca.current, pending: undefined, previousCertPem: undefined },
        annotations,
      );
      const dropped = ca.previousCertPem ? describeCertificate(ca.previousCertPem).commonName : 'none';
      return `old CA ${dropped} removed from the bundle and ${input.leaves.length} SKR ca.crt`;
    }
    default:
      return step.kind;
  }
}

function requirePending(ca: CaSecret, secrets: KcpPkiSecrets): CertificateAndKey {
  if (ca.pending === undefined) {
    throw new Error(
      `Secret ${secrets.namespace}/skr-watcher-ca records a rotation in progress but holds no pending CA; ` +
        'restore it or remove the rotation annotations',
    );
  }
  return ca.pending;
}
