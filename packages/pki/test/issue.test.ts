import { describe, it, before } from 'mocha';
import { expect } from 'chai';
import fc from 'fast-check';
import { KCP_LISTENER_IDENTITY } from '@skr-watcher/api';
import {
  createCa,
  describeCertificate,
  issueLeaf,
  issueLeafAsync,
  verifyLeaf,
  DEFAULT_LEAF_VALIDITY_DAYS,
  type CertificateAndKey,
} from '../src/index.js';
import { randomSerialHex } from '../src/signing.js';

const DAY_MS = 24 * 3600_000;
const label = fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,14}[a-z0-9])?$/);
const dnsName = fc.array(label, { minLength: 1, maxLength: 4 }).map((labels) => labels.join('.'));
const ipv4 = fc.ipV4();
const runtimeId = fc.stringMatching(/^[a-zA-Z0-9][a-zA-Z0-9._-]{0,40}$/);

describe('pki: CA and leaf issuance', function () {
  let ca: CertificateAndKey;
  before(function () {
    ca = createCa({ commonName: 'skr-watcher-test-ca', keyBits: 2048 });
  });

  it('creates a 4096-bit self-signed CA by default, CA:true, valid from now', function () {
    const now = new Date('2026-01-02T03:04:05.678Z');
    const ca4096 = createCa({ commonName: 'kcp-ca', now });
    const info = describeCertificate(ca4096.certPem);
    expect(info).to.include({ commonName: 'kcp-ca', issuerCommonName: 'kcp-ca', isCa: true, keyBits: 4096 });
    expect(info.notBefore.toISOString()).to.equal('2026-01-02T03:04:05.000Z');
    expect(ca4096.keyPem).to.match(/^-----BEGIN RSA PRIVATE KEY-----/);
  });

  it('every issued leaf verifies against its CA, carries the requested SANs and both usages, and is not a CA', function () {
    this.timeout(120_000);
    fc.assert(
      fc.property(
        runtimeId,
        fc.uniqueArray(dnsName, { minLength: 1, maxLength: 4 }),
        fc.uniqueArray(ipv4, { maxLength: 2 }),
        (id, dnsNames, ipAddresses) => {
          const leaf = issueLeaf({ ca, runtimeId: id, dnsNames, ipAddresses });
          const verdict = verifyLeaf(leaf.certPem, ca.certPem, { usages: ['serverAuth', 'clientAuth'] });
          expect(verdict.ok, verdict.ok ? '' : verdict.message).to.equal(true);
          const info = describeCertificate(leaf.certPem);
          expect(info.commonName).to.equal(id);
          expect(info.issuerCommonName).to.equal('skr-watcher-test-ca');
          expect(info.dnsNames).to.deep.equal(dnsNames);
          expect(info.ipAddresses).to.deep.equal(ipAddresses);
          expect(info.isCa).to.equal(false);
          expect(info.extendedKeyUsages).to.have.members(['serverAuth', 'clientAuth']);
          expect(info.keyBits).to.equal(2048);
        },
      ),
      { numRuns: 25 },
    );
  });

  it('issueLeafAsync gives the same kind of leaf without blocking the event loop', async function () {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    const leaves = await Promise.all(
      [0, 1, 2, 3].map((i) => issueLeafAsync({ ca, runtimeId: `async-${i}`, dnsNames: ['a.example'] })),
    );
    clearInterval(timer);
    for (const [i, leaf] of leaves.entries()) {
      expect(verifyLeaf(leaf.certPem, ca.certPem).ok).to.equal(true);
      expect(describeCertificate(leaf.certPem).commonName).to.equal(`async-${i}`);
    }
    expect(ticks, 'timers fired while keys were generated').to.be.greaterThan(0);
    await issueLeafAsync({ ca, runtimeId: 'rt', dnsNames: ['Bad_Name'] }).then(
      () => expect.fail('accepted a bad DNS name'),
      (error: Error) => expect(error.message).to.match(/DNS name/),
    );
  });

  it('issues 60-day leaves by default, starting at the injected instant', function () {
    const now = new Date(Date.now() + 3600_000);
    const info = describeCertificate(
      issueLeaf({ ca, runtimeId: 'rt', dnsNames: ['a.example'], now }).certPem,
    );
    expect(info.notBefore.getTime()).to.equal(Math.floor(now.getTime() / 1000) * 1000);
    expect(info.notAfter.getTime() - info.notBefore.getTime()).to.equal(DEFAULT_LEAF_VALIDITY_DAYS * DAY_MS);
  });

  it('never lets a leaf outlive its CA', function () {
    const shortCa = createCa({ commonName: 'short-ca', keyBits: 2048, validityDays: 10 });
    const leaf = describeCertificate(
      issueLeaf({ ca: shortCa, runtimeId: 'rt', dnsNames: ['a.example'] }).certPem,
    );
    expect(leaf.notAfter.getTime()).to.equal(describeCertificate(shortCa.certPem).notAfter.getTime());
  });

  it('keeps IPv6 SANs in canonical form', function () {
    const leaf = issueLeaf({
      ca,
      runtimeId: 'rt',
      dnsNames: [],
      ipAddresses: ['127.0.0.1', '::1', 'fd00::12'],
    });
    expect(describeCertificate(leaf.certPem).ipAddresses).to.deep.equal(['127.0.0.1', '::1', 'fd00::12']);
  });

  it('gives unique serial numbers over many issues', function () {
    this.timeout(120_000);
    const serials = new Set<string>();
    for (let i = 0; i < 60; i++) {
      serials.add(
        describeCertificate(issueLeaf({ ca, runtimeId: `rt-${i}`, dnsNames: ['x.example'] }).certPem)
          .serialNumber,
      );
    }
    expect(serials.size).to.equal(60);
  });

  it('draws 16-byte serials that are positive and minimally DER-encoded, without repeats', function () {
    const seen = new Set<string>();
    for (let i = 0; i < 20_000; i++) {
      const serial = randomSerialHex();
      expect(serial).to.match(/^(0[1-9a-f]|[1-7][0-9a-f])[0-9a-f]{30}$/);
      seen.add(serial);
    }
    expect(seen.size).to.equal(20_000);
  });

  it('refuses bad input with a message that names the runtime', function () {
    expect(() => issueLeaf({ ca, runtimeId: 'rt-x', dnsNames: ['Not_A_Host'] })).to.throw(/rt-x.*DNS name/);
    expect(() => issueLeaf({ ca, runtimeId: 'rt-x', dnsNames: [], ipAddresses: ['1.2.3'] })).to.throw(
      /IP address/,
    );
    expect(() => issueLeaf({ ca, runtimeId: 'rt-x', dnsNames: [] })).to.throw(/at least one DNS name/);
    expect(() => issueLeaf({ ca, runtimeId: '', dnsNames: ['a.example'] })).to.throw(/commonName/);
    expect(() =>
      issueLeaf({ ca, runtimeId: 'rt-x', dnsNames: ['a.example'], keyBits: 1024 as 2048 }),
    ).to.throw(RangeError, /2048, 3072, 4096/);
    expect(() => createCa({ commonName: 'x', keyBits: 8192 as 4096 })).to.throw(RangeError);
    expect(() => createCa({ commonName: 'x', validityDays: 0 })).to.throw(/validityDays/);
  });

  it("gives the KCP listener's leaf its reserved CN, and refuses that CN to any SKR leaf", function () {
    const listener = issueLeaf({ ca, role: 'listener', dnsNames: ['events.kcp.example.com'] });
    expect(describeCertificate(listener.certPem).commonName).to.equal(KCP_LISTENER_IDENTITY);
    expect(() => issueLeaf({ ca, runtimeId: KCP_LISTENER_IDENTITY, dnsNames: ['skr.example.com'] })).to.throw(
      RangeError,
      /runtime-id skr-agent-listener is reserved for the KCP listener/,
    );
  });

  it('refuses to sign with a leaf, a mismatched key or an expired CA', function () {
    const leaf = issueLeaf({ ca, runtimeId: 'rt', dnsNames: ['a.example'] });
    expect(() => issueLeaf({ ca: leaf, runtimeId: 'rt2', dnsNames: ['a.example'] })).to.throw(/is not a CA/);
    const other = createCa({ commonName: 'other', keyBits: 2048 });
    expect(() =>
      issueLeaf({
        ca: { certPem: ca.certPem, keyPem: other.keyPem },
        runtimeId: 'rt',
        dnsNames: ['a.example'],
      }),
    ).to.throw(/does not belong/);
    expect(() =>
      issueLeaf({ ca, runtimeId: 'rt', dnsNames: ['a.example'], now: new Date(Date.now() + 4000 * DAY_MS) }),
    ).to.throw(/not valid at/);
    expect(() =>
      issueLeaf({ ca: { certPem: 'garbage', keyPem: ca.keyPem }, runtimeId: 'rt', dnsNames: ['a'] }),
    ).to.throw(/not a readable/);
  });
});
