// skr-certs verify: does a leaf verify against a CA bundle (now, or at --at)? Exit 1 when it does not.
import { verifyLeaf, type LeafVerification } from '@skr-watcher/pki';
import { readPemFile } from '../files.js';
import type { CommandResult } from '../output.js';

export interface VerifyOptions {
  caBundle: string;
  cert: string;
  at?: Date;
  usage?: ('serverAuth' | 'clientAuth')[];
}

export function verify(opts: VerifyOptions, now: Date): { result: CommandResult; verdict: LeafVerification } {
  const bundlePem = readPemFile(opts.caBundle, 'CA bundle');
  const leafPem = readPemFile(opts.cert, 'certificate');
  const verdict = verifyLeaf(leafPem, bundlePem, { now: opts.at ?? now, usages: opts.usage ?? [] });
  const line = verdict.ok
    ? `${opts.cert}: OK (${verdict.leaf.commonName}, issued by ${verdict.issuer.commonName}, valid until ${verdict.leaf.notAfter.toISOString()})`
    : `${opts.cert}: FAILED ${verdict.reason}: ${verdict.message}`;
  return { result: { data: verdict, table: { lines: [line] } }, verdict };
}
