// skr-certs init-ca: a new CA, written to files or to the KCP Secrets (with the trust bundle).
import {
  addToBundle,
  createCa,
  describeCertificate,
  CA_IN_BUNDLE_SINCE_ANNOTATION,
  type RsaKeyBits,
} from '@skr-watcher/pki';
import { writeOutputFiles } from '../files.js';
import { KcpPkiSecrets } from '@skr-watcher/kube';
import { CERTIFICATE_COLUMNS, certificateRow, type CommandResult } from '../output.js';
import { UsageError } from '../options.js';

export interface InitCaOptions {
  commonName: string;
  keyBits: string;
  validityDays: number;
  outDir?: string;
  force?: boolean;
  kubeconfig?: string;
  namespace: string;
}

export async function initCa(opts: InitCaOptions, now: Date): Promise<CommandResult> {
  if ((opts.outDir === undefined) === (opts.kubeconfig === undefined)) {
    throw new UsageError('init-ca needs exactly one of --out-dir <dir> or --kubeconfig <path>');
  }
  const ca = createCa({
    commonName: opts.commonName,
    keyBits: Number(opts.keyBits) as RsaKeyBits,
    validityDays: opts.validityDays,
    now,
  });
  const info = describeCertificate(ca.certPem);
  let written: string[];
  if (opts.outDir !== undefined) {
    written = writeOutputFiles(
      opts.outDir,
      [
        { name: 'ca.crt', content: ca.certPem, secret: false },
        { name: 'ca.key', content: ca.keyPem, secret: true },
      ],
      opts.force === true,
    );
  } else {
    const secrets = await KcpPkiSecrets.fromKubeconfig(opts.kubeconfig as string, opts.namespace);
    await secrets.createCa(ca, { [CA_IN_BUNDLE_SINCE_ANNOTATION]: now.toISOString() });
    await secrets.writeBundle(addToBundle((await secrets.readBundle()) ?? '', ca.certPem));
    written = [`secret/${opts.namespace}/skr-watcher-ca`, `secret/${opts.namespace}/skr-watcher-ca-bundle`];
  }
  return {
    data: { certificate: info, written },
    table: {
      columns: [...CERTIFICATE_COLUMNS, 'WRITTEN'],
      rows: [[...certificateRow(info), written.join(',')]],
    },
  };
}
