// skr-certs issue: one SKR leaf (SANs: its domains, the webhook's Service names), from CA files into files, or
// from the KCP CA into its Secret.
import {
  describeCertificate,
  issueLeaf,
  LISTENER_TLS_SECRET_NAME,
  rotationStateFromAnnotations,
  webhookDnsNames,
  type CertificateAndKey,
  type RsaKeyBits,
  signingCaFor,
} from '@skr-watcher/pki';
import { KCP_LISTENER_IDENTITY } from '@skr-watcher/api';
import { readPemFile, writeOutputFiles } from '../files.js';
import { KcpPkiSecrets } from '@skr-watcher/kube';
import { CERTIFICATE_COLUMNS, certificateRow, type CommandResult } from '../output.js';
import { UsageError } from '../options.js';

export interface IssueOptions {
  runtimeId: string;
  domain: string[];
  ip?: string[];
  keyBits: string;
  validityDays: number;
  caCert?: string;
  caKey?: string;
  caBundle?: string;
  outDir?: string;
  force?: boolean;
  kubeconfig?: string;
  kyma?: string;
  /** KCP mode: the listener's serving certificate (Secret skr-agent-listener-tls) instead of an SKR's. */
  listener?: boolean;
  namespace: string;
}

export async function issue(opts: IssueOptions, now: Date): Promise<CommandResult> {
  const fileMode = opts.caCert !== undefined || opts.caKey !== undefined || opts.outDir !== undefined;
  const kubeMode = opts.kubeconfig !== undefined || opts.kyma !== undefined || opts.listener === true;
  if (fileMode === kubeMode) {
    throw new UsageError(
      'issue needs either --ca-cert, --ca-key and --out-dir, or --kubeconfig and --kyma (or --listener)',
    );
  }
  if (fileMode && (opts.caCert === undefined || opts.caKey === undefined || opts.outDir === undefined)) {
    throw new UsageError('issue from files needs --ca-cert, --ca-key and --out-dir');
  }
  if (kubeMode && (opts.kubeconfig === undefined || (opts.kyma === undefined) === (opts.listener !== true))) {
    throw new UsageError('issue into the KCP needs --kubeconfig and one of --kyma or --listener');
  }

  if (opts.listener && opts.runtimeId !== KCP_LISTENER_IDENTITY) {
    // SKR webhooks accept the KCP server under this CN only, and no SKR leaf may carry it (decision 004).
    throw new UsageError(`the listener certificate's --runtime-id must be ${KCP_LISTENER_IDENTITY}`);
  }
  if (!opts.listener && opts.runtimeId === KCP_LISTENER_IDENTITY) {
    throw new UsageError(`--runtime-id ${KCP_LISTENER_IDENTITY} is reserved for the listener (--listener)`);
  }

  let ca: CertificateAndKey;
  let bundlePem: string;
  let secrets: KcpPkiSecrets | undefined;
  if (fileMode) {
    ca = {
      certPem: readPemFile(opts.caCert as string, 'CA certificate'),
      keyPem: readPemFile(opts.caKey as string, 'CA key'),
    };
    bundlePem = opts.caBundle !== undefined ? readPemFile(opts.caBundle, 'CA bundle') : ca.certPem;
  } else {
    secrets = await KcpPkiSecrets.fromKubeconfig(opts.kubeconfig as string, opts.namespace);
    const stored = await secrets.readCa();
    if (stored === undefined)
      throw new Error(`Secret ${opts.namespace}/skr-watcher-ca not found; run init-ca first`);
    ca = signingCaFor(stored, rotationStateFromAnnotations(stored.annotations));
    bundlePem = (await secrets.readBundle()) ?? ca.certPem;
  }

  const leaf = issueLeaf({
    ca,
    ...(opts.listener ? { role: 'listener' as const } : { runtimeId: opts.runtimeId }),
    // The listener is reached by its own names only; an SKR leaf also serves the webhook's Service names.
    dnsNames: opts.listener ? opts.domain.map((d) => d.toLowerCase()) : webhookDnsNames(opts.domain),
    ipAddresses: opts.ip ?? [],
    keyBits: Number(opts.keyBits) as RsaKeyBits,
    validityDays: opts.validityDays,
    now,
  });
  let written: string[];
  if (secrets !== undefined && opts.listener) {
    await secrets.writeListenerLeaf(leaf, bundlePem);
    written = [`secret/${opts.namespace}/${LISTENER_TLS_SECRET_NAME}`];
  } else if (secrets !== undefined) {
    await secrets.writeLeaf(opts.kyma as string, leaf, bundlePem);
    written = [`secret/${opts.namespace}/${opts.kyma as string}-webhook-tls`];
  } else {
    written = writeOutputFiles(
      opts.outDir as string,
      [
        { name: 'tls.crt', content: leaf.certPem, secret: false },
        { name: 'tls.key', content: leaf.keyPem, secret: true },
        { name: 'ca.crt', content: bundlePem, secret: false },
      ],
      opts.force === true,
    );
  }
  const info = describeCertificate(leaf.certPem);
  return {
    data: { certificate: info, written },
    table: {
      columns: [...CERTIFICATE_COLUMNS, 'WRITTEN'],
      rows: [[...certificateRow(info), written.join(',')]],
    },
  };
}
