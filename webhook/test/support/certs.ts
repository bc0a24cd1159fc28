// Test certificates from the project's own pki package, and a directory laid out like a mounted Secret.
import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCa, issueLeaf, type CertificateAndKey } from '@skr-watcher/pki';

export type { CertificateAndKey };

export interface TestPki {
  ca: CertificateAndKey;
  /** A leaf with IP SAN 127.0.0.1: serves admission and is the client certificate towards KCP. */
  leaf(runtimeId: string): CertificateAndKey;
  /** The KCP listener's certificate (its reserved CN) for 127.0.0.1: what the webhook's KCP client accepts. */
  listener(): CertificateAndKey;
}

export function testPki(commonName = 'skr-webhook-test-ca'): TestPki {
  const ca = createCa({ commonName, keyBits: 2048, validityDays: 2 });
  return {
    ca,
    leaf: (runtimeId) =>
      issueLeaf({
        ca,
        runtimeId,
        dnsNames: ['localhost'],
        ipAddresses: ['127.0.0.1'],
        keyBits: 2048,
        validityDays: 1,
      }),
    listener: () =>
      issueLeaf({
        ca,
        role: 'listener',
        dnsNames: ['localhost'],
        ipAddresses: ['127.0.0.1'],
        keyBits: 2048,
        validityDays: 1,
      }),
  };
}

/**
 * A directory updated the way the kubelet updates Secret volumes: the files are symlinks into
 * `..data`, itself a symlink to a timestamped directory that is swapped atomically by rename.
 */
export class SecretVolume {
  private generation = 0;
  private constructor(readonly dir: string) {}

  static async create(files: Record<string, string>): Promise<SecretVolume> {
    const volume = new SecretVolume(await mkdtemp(join(tmpdir(), 'skr-webhook-secret-')));
    await volume.update(files);
    for (const name of Object.keys(files)) await symlink(join('..data', name), join(volume.dir, name));
    return volume;
  }

  path(name: string): string {
    return join(this.dir, name);
  }

  async update(files: Record<string, string>): Promise<void> {
    const generationDir = `..${Date.now()}_${++this.generation}`;
    await mkdir(join(this.dir, generationDir));
    for (const [name, content] of Object.entries(files))
      await writeFile(join(this.dir, generationDir, name), content);
    await symlink(generationDir, join(this.dir, '..data_tmp'));
    await rename(join(this.dir, '..data_tmp'), join(this.dir, '..data'));
  }

  remove(): Promise<void> {
    return rm(this.dir, { recursive: true, force: true });
  }
}

/** The Secret keys the webhook reads, from a leaf and its CA. */
export function secretFiles(leaf: CertificateAndKey, caPem: string): Record<string, string> {
  return { 'tls.crt': leaf.certPem, 'tls.key': leaf.keyPem, 'ca.crt': caPem };
}
