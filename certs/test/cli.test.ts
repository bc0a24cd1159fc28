// Journeys through the built skr-certs binary with files: output, exit codes, file modes, no key on screen.
import { describe, it, before, after } from 'mocha';
import { expect } from 'chai';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { buildBinary, skrCerts } from './skr-certs-binary.js';

describe('skr-certs journeys with files', function () {
  let dir: string;
  before(function () {
    this.timeout(120_000);
    buildBinary();
    dir = mkdtempSync(join(tmpdir(), 'skr-certs-cli-'));
  });
  after(function () {
    rmSync(dir, { recursive: true, force: true });
  });

  it('init-ca, issue, verify and inspect: an operator gets a working CA and leaf, keys 0600 and never printed', async function () {
    const ca = await skrCerts(['init-ca', '--out-dir', join(dir, 'ca'), '--key-bits', '2048', '-o', 'json']);
    expect(ca.code, ca.stderr).to.equal(0);
    const caOut = JSON.parse(ca.stdout) as { certificate: { isCa: boolean; commonName: string } };
    expect(caOut.certificate).to.include({ isCa: true, commonName: 'skr-watcher-ca' });
    expect(statSync(join(dir, 'ca', 'ca.key')).mode & 0o777).to.equal(0o600);

    const leafArgs = [
      'issue',
      '--ca-cert',
      join(dir, 'ca', 'ca.crt'),
      '--ca-key',
      join(dir, 'ca', 'ca.key'),
      '--out-dir',
      join(dir, 'leaf'),
      '--runtime-id',
      'runtime-7',
      '--domain',
      'skr7.example.com',
      '--ip',
      '127.0.0.1',
    ];
    const leaf = await skrCerts([...leafArgs, '-o', 'yaml']);
    expect(leaf.code, leaf.stderr).to.equal(0);
    const leafOut = parseYaml(leaf.stdout) as {
      certificate: { commonName: string; dnsNames: string[]; ipAddresses: string[] };
    };
    expect(leafOut.certificate.commonName).to.equal('runtime-7');
    expect(leafOut.certificate.dnsNames).to.deep.equal([
      'skr7.example.com',
      'skr-webhook.kyma-system.svc',
      'skr-webhook.kyma-system.svc.cluster.local',
    ]);
    expect(leafOut.certificate.ipAddresses).to.deep.equal(['127.0.0.1']);
    expect(statSync(join(dir, 'leaf', 'tls.key')).mode & 0o777).to.equal(0o600);
    expect(statSync(join(dir, 'leaf', 'tls.crt')).mode & 0o077).to.not.equal(0);

    const verified = await skrCerts([
      'verify',
      '--ca-bundle',
      join(dir, 'leaf', 'ca.crt'),
      '--cert',
      join(dir, 'leaf', 'tls.crt'),
    ]);
    expect(verified.code).to.equal(0);
    expect(verified.stdout).to.match(/: OK \(runtime-7, issued by skr-watcher-ca/);

    const table = await skrCerts(['inspect', join(dir, 'leaf', 'tls.crt')]);
    expect(table.code).to.equal(0);
    expect(table.stdout.split('\n')[0]).to.match(/^SOURCE\s+SUBJECT CN\s+ISSUER CN/);
    expect(table.stdout).to.contain('runtime-7');

    const keyFile = await skrCerts(['inspect', join(dir, 'leaf', 'tls.key')]);
    expect(keyFile.code).to.equal(0);
    expect(keyFile.stdout).to.match(/tls\.key\s+\(private key\)/);

    // The listener's CN is reserved: an SKR leaf with it could serve as the listener to other SKRs' webhooks.
    const reserved = await skrCerts(
      leafArgs.map((arg) => (arg === 'runtime-7' ? 'skr-agent-listener' : arg)),
    );
    expect(reserved.code).to.equal(2);
    expect(reserved.stderr).to.match(/--runtime-id skr-agent-listener is reserved for the listener/);

    for (const result of [ca, leaf, verified, table, keyFile]) {
      expect(result.stdout + result.stderr).to.not.match(/PRIVATE KEY|MII[A-Za-z0-9+/]{20}/);
    }
  });

  it('verify exits 1 with the reason for a foreign or expired leaf', async function () {
    const other = await skrCerts(['init-ca', '--out-dir', join(dir, 'other'), '--key-bits', '2048']);
    expect(other.code).to.equal(0);
    const foreign = await skrCerts([
      'verify',
      '--ca-bundle',
      join(dir, 'other', 'ca.crt'),
      '--cert',
      join(dir, 'leaf', 'tls.crt'),
      '-o',
      'json',
    ]);
    expect(foreign.code).to.equal(1);
    expect(JSON.parse(foreign.stdout)).to.include({ ok: false });
    expect((JSON.parse(foreign.stdout) as { reason: string }).reason).to.be.oneOf([
      'unknown-issuer',
      'bad-signature',
    ]);
    const expired = await skrCerts([
      'verify',
      '--ca-bundle',
      join(dir, 'leaf', 'ca.crt'),
      '--cert',
      join(dir, 'leaf', 'tls.crt'),
      '--at',
      '2099-01-01T00:00:00Z',
    ]);
    expect(expired.code).to.equal(1);
    expect(expired.stdout).to.match(/FAILED expired/);
  });

  it('refuses to overwrite files unless --force', async function () {
    const again = await skrCerts(['init-ca', '--out-dir', join(dir, 'ca'), '--key-bits', '2048']);
    expect(again.code).to.equal(1);
    expect(again.stderr).to.match(/refusing to overwrite .*ca\.crt/);
    const before = readFileSync(join(dir, 'ca', 'ca.crt'), 'utf8');
    writeFileSync(join(dir, 'wide.key'), 'x', { mode: 0o644 });
    const forced = await skrCerts(['init-ca', '--out-dir', join(dir, 'ca'), '--key-bits', '2048', '--force']);
    expect(forced.code).to.equal(0);
    expect(readFileSync(join(dir, 'ca', 'ca.crt'), 'utf8')).to.not.equal(before);
    expect(statSync(join(dir, 'ca', 'ca.key')).mode & 0o777).to.equal(0o600);
  });

  it('exits 2 on usage errors: bad flags, bad values, conflicting or missing modes', async function () {
    const cases: string[][] = [
      [],
      ['frobnicate'],
      ['init-ca', '--out-dir', join(dir, 'x'), '--key-bits', '1024'],
      ['init-ca', '--out-dir', join(dir, 'x'), '-o', 'xml'],
      ['init-ca'],
      ['init-ca', '--out-dir', join(dir, 'x'), '--kubeconfig', '/nonexistent'],
      ['issue', '--runtime-id', 'rt'],
      ['issue', '--runtime-id', 'rt', '--domain', 'a.example', '--ca-cert', 'ca.crt'],
      ['verify', '--cert', 'x'],
      ['verify', '--ca-bundle', 'x', '--cert', 'y', '--at', 'yesterday'],
      ['rotate-ca', '--kubeconfig', 'k', '--grace-period', '5 minutes'],
      ['inspect'],
      ['inspect', 'file.pem', '--secret', 'ns/name'],
      ['status', '--bogus'],
    ];
    for (const args of cases) {
      const result = await skrCerts(args);
      expect(result.code, `skr-certs ${args.join(' ')}: ${result.stderr}`).to.equal(2);
      expect(result.stderr, args.join(' ')).to.match(/error|Usage/);
    }
  });

  it('exits 0 for --help on every command', async function () {
    for (const command of ['init-ca', 'issue', 'inspect', 'verify', 'rotate-ca', 'status']) {
      const result = await skrCerts([command, '--help']);
      expect(result.code).to.equal(0);
      expect(result.stdout).to.contain(`Usage: skr-certs ${command}`);
    }
  });

  it('exits 1 with the path and reason for unreadable or malformed files', async function () {
    const missing = await skrCerts(['inspect', join(dir, 'missing.pem')]);
    expect(missing.code).to.equal(1);
    expect(missing.stderr).to.match(/read certificate .*missing\.pem: ENOENT/);

    writeFileSync(join(dir, 'garbage.pem'), 'not a certificate');
    const garbage = await skrCerts(['inspect', join(dir, 'garbage.pem')]);
    expect(garbage.code).to.equal(1);
    expect(garbage.stderr).to.match(/garbage\.pem: no PEM certificate found/);

    if (process.getuid?.() !== 0) {
      writeFileSync(join(dir, 'locked.pem'), 'x');
      chmodSync(join(dir, 'locked.pem'), 0o000);
      const locked = await skrCerts(['inspect', join(dir, 'locked.pem')]);
      expect(locked.code).to.equal(1);
      expect(locked.stderr).to.match(/EACCES/);
    }
    const directory = await skrCerts(['verify', '--ca-bundle', dir, '--cert', join(dir, 'leaf', 'tls.crt')]);
    expect(directory.code).to.equal(1);
    expect(directory.stderr).to.match(/read CA bundle .*: EISDIR/);

    const badKey = await skrCerts([
      'issue',
      '--ca-cert',
      join(dir, 'ca', 'ca.crt'),
      '--ca-key',
      join(dir, 'garbage.pem'),
      '--out-dir',
      join(dir, 'leaf2'),
      '--runtime-id',
      'rt',
      '--domain',
      'a.example',
    ]);
    expect(badKey.code).to.equal(1);
    expect(badKey.stderr).to.match(/CA key: not a readable PEM private key/);
  });
});
