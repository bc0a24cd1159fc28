// skr-certs inspect: what a PEM file or a Secret holds; private keys are reported as present, never shown.
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { describeCertificates, type CertificateInfo } from '@skr-watcher/pki';
import { readPemFile } from '../files.js';
import { KcpPkiSecrets } from '@skr-watcher/kube';
import { CERTIFICATE_COLUMNS, certificateRow, type CommandResult } from '../output.js';
import { UsageError } from '../options.js';

export interface InspectOptions {
  secret?: string;
  kubeconfig?: string;
}

interface Entry {
  source: string;
  certificates: CertificateInfo[];
  privateKey?: { present: true; matchesCertificate: boolean | undefined };
}

export async function inspect(file: string | undefined, opts: InspectOptions): Promise<CommandResult> {
  if ((file === undefined) === (opts.secret === undefined)) {
    throw new UsageError('inspect needs a file or --secret <namespace>/<name>, not both');
  }
  const entries: Entry[] = [];
  if (file !== undefined) {
    const pem = readPemFile(file, 'certificate');
    if (pem.includes('PRIVATE KEY-----') && !pem.includes('-----BEGIN CERTIFICATE-----')) {
      entries.push({
        source: file,
        certificates: [],
        privateKey: { present: true, matchesCertificate: undefined },
      });
    } else {
      entries.push({ source: file, certificates: describeCertificates(pem, file) });
    }
  } else {
    const match = /^([a-z0-9-]{1,63})\/([a-z0-9.-]{1,253})$/.exec(opts.secret as string);
    if (match === null) throw new UsageError('--secret must be <namespace>/<name>');
    if (opts.kubeconfig === undefined) throw new UsageError('--secret needs --kubeconfig');
    const [, namespace, name] = match as unknown as [string, string, string];
    const secret = await (await KcpPkiSecrets.fromKubeconfig(opts.kubeconfig, namespace)).read(name);
    if (secret === undefined) throw new Error(`Secret ${namespace}/${name} not found`);
    const data = Object.entries(secret.data ?? {})
      .map(([key, value]) => [key, Buffer.from(value, 'base64').toString('utf8')] as const)
      .sort(([a], [b]) => a.localeCompare(b));
    for (const [key, value] of data) {
      const source = `${namespace}/${name}:${key}`;
      if (value.includes('PRIVATE KEY-----')) {
        const certPem = data.find(([k]) => k === key.replace(/key$/, 'crt'))?.[1];
        entries.push({
          source,
          certificates: [],
          privateKey: { present: true, matchesCertificate: keyMatches(value, certPem) },
        });
      } else if (value.includes('-----BEGIN CERTIFICATE-----')) {
        entries.push({ source, certificates: describeCertificates(value, source) });
      }
    }
  }
  const rows: string[][] = [];
  for (const entry of entries) {
    for (const info of entry.certificates) rows.push([entry.source, ...certificateRow(info)]);
    if (entry.privateKey) {
      const match = entry.privateKey.matchesCertificate;
      rows.push([
        entry.source,
        '(private key)',
        '-',
        'key',
        '-',
        match === undefined ? '-' : match ? 'matches certificate' : 'DOES NOT MATCH certificate',
        '-',
      ]);
    }
  }
  return { data: entries, table: { columns: ['SOURCE', ...CERTIFICATE_COLUMNS], rows } };
}

function keyMatches(keyPem: string, certPem: string | undefined): boolean | undefined {
  if (certPem === undefined) return undefined;
  try {
    return new X509Certificate(certPem).checkPrivateKey(createPrivateKey(keyPem));
  } catch {
    return false;
  }
}
