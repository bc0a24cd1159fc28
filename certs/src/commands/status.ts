// skr-certs status: one row per SKR certificate with what it needs now.
import {
  bundleContains,
  decideLeaf,
  describeCertificate,
  isSignedBy,
  parseTimestamp,
  rotationStateFromAnnotations,
  verifyLeaf,
  CA_IN_BUNDLE_SINCE_ANNOTATION,
  type LeafAction,
} from '@skr-watcher/pki';
import { KcpPkiSecrets } from '@skr-watcher/kube';
import { formatTable, type CommandResult } from '../output.js';

export interface StatusOptions {
  kubeconfig: string;
  namespace: string;
}

export interface LeafStatus {
  kyma: string;
  runtimeId: string;
  notAfter: Date;
  issuer: string;
  needs: LeafAction;
  reason: string;
}

export async function status(opts: StatusOptions, now: Date): Promise<CommandResult> {
  const secrets = await KcpPkiSecrets.fromKubeconfig(opts.kubeconfig, opts.namespace);
  const ca = await secrets.readCa();
  if (ca === undefined)
    throw new Error(`Secret ${opts.namespace}/skr-watcher-ca not found; run init-ca first`);
  const bundlePem = (await secrets.readBundle()) ?? '';
  const rotation = rotationStateFromAnnotations(ca.annotations);
  const since = ca.annotations[CA_IN_BUNDLE_SINCE_ANNOTATION];
  const caInBundleSince = since ? parseTimestamp(since, CA_IN_BUNDLE_SINCE_ANNOTATION) : undefined;

  const leaves: LeafStatus[] = [];
  for (const leaf of await secrets.listLeaves()) {
    const info = describeCertificate(leaf.certPem);
    const verdict = verifyLeaf(leaf.certPem, bundlePem, { now });
    // During a rotation, leaves already moved to the pending CA are where they should be.
    const signedByCurrentCa =
      isSignedBy(leaf.certPem, ca.current.certPem) ||
      (ca.pending !== undefined && isSignedBy(leaf.certPem, ca.pending.certPem));
    let decision = decideLeaf(info, { now, currentCaInBundleSince: caInBundleSince, signedByCurrentCa });
    if (decision.action === 'none' && !safeBundleContains(leaf.caPem, ca.current.certPem)) {
      decision = { action: 'reissue', reason: 'its ca.crt does not hold the signing CA' };
    }
    if (!verdict.ok && verdict.reason !== 'expired' && decision.action === 'none') {
      decision = { action: 'reissue', reason: `does not verify against the bundle: ${verdict.message}` };
    }
    leaves.push({
      kyma: leaf.kymaName || '(KCP listener)',
      runtimeId: info.commonName,
      notAfter: info.notAfter,
      issuer: info.issuerCommonName,
      needs: decision.action,
      reason: decision.reason,
    });
  }

  const caInfo = describeCertificate(ca.current.certPem);
  const header = [
    `CA: ${caInfo.commonName} (valid until ${caInfo.notAfter.toISOString()})`,
    `rotation: ${rotation.phase}`,
    `bundle: ${bundlePem === '' ? 'missing' : `${(bundlePem.match(/BEGIN CERTIFICATE/g) ?? []).length} CA(s)`}`,
    '',
  ];
  const table = formatTable(
    ['KYMA', 'RUNTIME-ID', 'NOT AFTER', 'ISSUER', 'NEEDS'],
    leaves.map((l) => [l.kyma, l.runtimeId, l.notAfter.toISOString(), l.issuer, `${l.needs} (${l.reason})`]),
  );
  return {
    data: { ca: caInfo, rotation, bundleSize: (bundlePem.match(/BEGIN CERTIFICATE/g) ?? []).length, leaves },
    table: { lines: [...header, ...table.trimEnd().split('\n')] },
  };
}

function safeBundleContains(bundlePem: string, caPem: string): boolean {
  try {
    return bundleContains(bundlePem, caPem);
  } catch {
    return false;
  }
}
