// Certificates from this library work with OpenSSL and with Node's TLS stack (mutual auth, strict verification).
import { describe, it, before, after } from 'mocha';
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { promisify } from 'node:util';
import { connect, createServer, type TLSSocket } from 'node:tls';
import type { AddressInfo } from 'node:net';
import { addToBundle, createCa, issueLeaf, type CertificateAndKey } from '../src/index.js';

const run = promisify(execFile);

describe('pki: interoperability with openssl and Node TLS', function () {
  let dir: string;
  let ca: CertificateAndKey;
  let foreignCa: CertificateAndKey;
  before(function () {
    dir = mkdtempSync(join(tmpdir(), 'pki-interop-'));
    ca = createCa({ commonName: 'skr-watcher-ca' });
    foreignCa = createCa({ commonName: 'skr-watcher-ca', keyBits: 2048 });
  });
  after(function () {
    rmSync(dir, { recursive: true, force: true });
  });

  function file(name: string, content: string): string {
    const path = join(dir, name);
    writeFileSync(path, content);
    return path;
  }

  async function opensslVerify(caPem: string, leafPem: string, purpose: string) {
    return run('openssl', [
      'verify',
      '-x509_strict',
      '-purpose',
      purpose,
      '-CAfile',
      file('ca.pem', caPem),
      file('leaf.pem', leafPem),
    ]).then(
      (r) => ({ ok: true, out: r.stdout + r.stderr }),
      (e: { stdout: string; stderr: string }) => ({ ok: false, out: e.stdout + e.stderr }),
    );
  }

  it('describing a certificate first does not break node:tls in a fresh process (Node 22 toLegacyObject bug)', async function () {
    const script = [
      "import { describeCertificate, createCa } from '@skr-watcher/pki';",
      "describeCertificate(createCa({ commonName: 'x', keyBits: 2048 }).certPem);",
      "const tls = await import('node:tls');",
      'console.log(typeof tls.createSecureContext);',
    ].join('\n');
    const { stdout } = await run(
      process.execPath,
      ['--import', 'tsx', '--conditions=source', '--input-type=module', '-e', script],
      {
        cwd: join(import.meta.dirname, '..'),
      },
    );
    expect(stdout.trim()).to.equal('function');
  });

  it('openssl verify (x509_strict) accepts the leaf for TLS server and client use', async function () {
    const leaf = issueLeaf({
      ca,
      runtimeId: 'rt-1',
      dnsNames: ['skr.example.com'],
      ipAddresses: ['127.0.0.1'],
    });
    for (const purpose of ['sslserver', 'sslclient']) {
      const result = await opensslVerify(ca.certPem, leaf.certPem, purpose);
      expect(result.out).to.match(/: OK/);
      expect(result.ok).to.equal(true);
    }
  });

  it('openssl verify accepts leaves of both CAs against a rotation bundle and refuses a foreign leaf', async function () {
    const newCa = createCa({ commonName: 'skr-watcher-ca-2', keyBits: 2048 });
    const bundle = addToBundle(addToBundle('', ca.certPem), newCa.certPem);
    for (const signer of [ca, newCa]) {
      const leaf = issueLeaf({ ca: signer, runtimeId: 'rt', dnsNames: ['a.example'] });
      expect((await opensslVerify(bundle, leaf.certPem, 'sslclient')).ok).to.equal(true);
    }
    const foreign = issueLeaf({ ca: foreignCa, runtimeId: 'rt', dnsNames: ['a.example'] });
    const refused = await opensslVerify(bundle, foreign.certPem, 'sslclient');
    expect(refused.ok).to.equal(false);
    expect(refused.out).to.match(/signature failure|unable to get local issuer/);
  });

  async function mutualTls(server: CertificateAndKey, client: CertificateAndKey, trust: string) {
    let accepted = 0;
    const tls = createServer(
      { cert: server.certPem, key: server.keyPem, ca: trust, requestCert: true, rejectUnauthorized: true },
      (socket: TLSSocket) => {
        accepted++;
        socket.end(`hello ${String(socket.getPeerCertificate().subject?.CN)}`);
      },
    );
    const errors: Error[] = [];
    tls.on('tlsClientError', (error) => errors.push(error));
    tls.listen(0, '127.0.0.1');
    await once(tls, 'listening');
    const { port } = tls.address() as AddressInfo;
    try {
      const socket = connect({
        host: '127.0.0.1',
        port,
        cert: client.certPem,
        key: client.keyPem,
        ca: trust,
        rejectUnauthorized: true,
      });
      const chunks: Buffer[] = [];
      socket.on('data', (chunk: Buffer) => chunks.push(chunk));
      const outcome = await new Promise<string>((resolve, reject) => {
        socket.on('end', () => resolve(Buffer.concat(chunks).toString()));
        socket.on('error', reject);
      }).then(
        (body) => ({ ok: true as const, body }),
        (error: Error) => ({ ok: false as const, error }),
      );
      socket.destroy();
      return { ...outcome, accepted, serverErrors: errors };
    } finally {
      tls.close();
    }
  }

  it('a Node TLS server and client complete mutual TLS with rejectUnauthorized: true; the server sees the runtime-id', async function () {
    const server = issueLeaf({
      ca,
      runtimeId: 'kcp-listener',
      dnsNames: ['localhost'],
      ipAddresses: ['127.0.0.1'],
    });
    const client = issueLeaf({ ca, runtimeId: 'runtime-42', dnsNames: ['skr.example.com'] });
    const result = await mutualTls(server, client, ca.certPem);
    expect(result).to.include({ ok: true, body: 'hello runtime-42', accepted: 1 });
  });

  it('during a rotation, peers with leaves of the old and of the new CA complete mutual TLS both ways', async function () {
    const nextCa = createCa({ commonName: 'skr-watcher-ca-next', keyBits: 2048 });
    const bundle = addToBundle(addToBundle('', ca.certPem), nextCa.certPem);
    const oldLeaf = (id: string) =>
      issueLeaf({ ca, runtimeId: id, dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
    const newLeaf = (id: string) =>
      issueLeaf({ ca: nextCa, runtimeId: id, dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
    expect(await mutualTls(newLeaf('listener'), oldLeaf('runtime-old'), bundle)).to.include({
      body: 'hello runtime-old',
    });
    expect(await mutualTls(oldLeaf('listener'), newLeaf('runtime-new'), bundle)).to.include({
      body: 'hello runtime-new',
    });
  });

  it('the server refuses a client certificate from a foreign CA with the same name', async function () {
    const server = issueLeaf({
      ca,
      runtimeId: 'kcp-listener',
      dnsNames: ['localhost'],
      ipAddresses: ['127.0.0.1'],
    });
    const intruder = issueLeaf({ ca: foreignCa, runtimeId: 'runtime-42', dnsNames: ['skr.example.com'] });
    const result = await mutualTls(server, intruder, ca.certPem);
    expect(result.accepted).to.equal(0);
    expect(result.serverErrors).to.have.length.greaterThan(0);
    expect(result.ok && result.body.startsWith('hello')).to.equal(false);
  });
});
