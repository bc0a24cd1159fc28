import { describe, it, before } from 'mocha';
import { expect } from 'chai';
import fc from 'fast-check';
import {
  addToBundle,
  bundleCertificates,
  bundleContains,
  createCa,
  describeCertificates,
  dropExpired,
  isSignedBy,
  issueLeaf,
  removeFromBundle,
  verifyLeaf,
  type CertificateAndKey,
} from '../src/index.js';

const DAY_MS = 24 * 3600_000;

describe('pki: trust bundles and leaf verification', function () {
  let oldCa: CertificateAndKey;
  let newCa: CertificateAndKey;
  let foreignCa: CertificateAndKey;
  const now = new Date();
  before(function () {
    oldCa = createCa({ commonName: 'skr-watcher-ca', keyBits: 2048, now });
    // Same subject on purpose: rotation may keep the name; key identifiers and signatures tell them apart.
    newCa = createCa({ commonName: 'skr-watcher-ca', keyBits: 2048, now });
    foreignCa = createCa({ commonName: 'someone-else', keyBits: 2048, now });
  });

  it('adds a CA once, however often it is added', function () {
    let bundle = addToBundle('', oldCa.certPem);
    bundle = addToBundle(bundle, newCa.certPem);
    bundle = addToBundle(bundle, oldCa.certPem);
    expect(bundleCertificates(bundle)).to.have.length(2);
    expect(bundleContains(bundle, newCa.certPem)).to.equal(true);
    expect(bundleContains(removeFromBundle(bundle, oldCa.certPem), oldCa.certPem)).to.equal(false);
    expect(() =>
      addToBundle(bundle, issueLeaf({ ca: oldCa, runtimeId: 'rt', dnsNames: ['a.b'] }).certPem),
    ).to.throw(/not a CA/);
  });

  it('drops only the CAs expired at the injected instant', function () {
    const shortCa = createCa({ commonName: 'short', keyBits: 2048, validityDays: 1, now });
    const bundle = addToBundle(addToBundle('', oldCa.certPem), shortCa.certPem);
    const later = dropExpired(bundle, new Date(now.getTime() + DAY_MS));
    expect(later.dropped.map((ca) => ca.commonName)).to.deep.equal(['short']);
    expect(describeCertificates(later.bundlePem).map((ca) => ca.commonName)).to.deep.equal([
      'skr-watcher-ca',
    ]);
    expect(dropExpired(bundle, new Date(now.getTime() + DAY_MS - 1000)).dropped).to.have.length(0);
  });

  it('verifies leaves of both CAs against a bundle holding both, and tells which CA signed', function () {
    const bundle = addToBundle(addToBundle('', oldCa.certPem), newCa.certPem);
    const fromOld = issueLeaf({ ca: oldCa, runtimeId: 'rt-old', dnsNames: ['old.example'] });
    const fromNew = issueLeaf({ ca: newCa, runtimeId: 'rt-new', dnsNames: ['new.example'] });
    for (const [leaf, ca] of [
      [fromOld, oldCa],
      [fromNew, newCa],
    ] as const) {
      const verdict = verifyLeaf(leaf.certPem, bundle);
      expect(verdict.ok).to.equal(true);
      expect(isSignedBy(leaf.certPem, ca.certPem)).to.equal(true);
    }
    expect(isSignedBy(fromOld.certPem, newCa.certPem)).to.equal(false);
    const onlyNew = verifyLeaf(fromOld.certPem, newCa.certPem);
    expect(onlyNew.ok).to.equal(false);
    expect(onlyNew.ok ? '' : onlyNew.reason).to.be.oneOf(['bad-signature', 'unknown-issuer']);
  });

  it('rejects a leaf from a foreign CA, expired or not yet valid leaves, and CAs posing as leaves', function () {
    const foreign = issueLeaf({ ca: foreignCa, runtimeId: 'rt', dnsNames: ['a.example'] });
    const leaf = issueLeaf({ ca: oldCa, runtimeId: 'rt', dnsNames: ['a.example'], now });
    const reason = (v: ReturnType<typeof verifyLeaf>) => (v.ok ? 'ok' : v.reason);
    expect(reason(verifyLeaf(foreign.certPem, oldCa.certPem))).to.equal('unknown-issuer');
    expect(
      reason(verifyLeaf(leaf.certPem, oldCa.certPem, { now: new Date(now.getTime() + 61 * DAY_MS) })),
    ).to.equal('expired');
    expect(reason(verifyLeaf(leaf.certPem, oldCa.certPem, { now: new Date(now.getTime() - 2000) }))).to.equal(
      'not-yet-valid',
    );
    expect(reason(verifyLeaf(oldCa.certPem, oldCa.certPem))).to.equal('is-a-ca');
    const shortCa = createCa({ commonName: 'short', keyBits: 2048, validityDays: 1, now });
    const shortLeaf = issueLeaf({ ca: shortCa, runtimeId: 'rt', dnsNames: ['a.example'], now });
    expect(
      reason(verifyLeaf(shortLeaf.certPem, shortCa.certPem, { now: new Date(now.getTime() + DAY_MS) })),
    ).to.equal('expired');
  });

  it('parses arbitrary text without crashing: certificates or an Error that says what was wrong', function () {
    const leafPem = issueLeaf({ ca: oldCa, runtimeId: 'rt', dnsNames: ['a.example'] }).certPem;
    fc.assert(
      fc.property(
        fc.string({ maxLength: 400 }),
        fc.nat(leafPem.length),
        fc.string({ maxLength: 8 }),
        (junk, cut, insert) => {
          for (const input of [junk, leafPem.slice(0, cut) + insert + leafPem.slice(cut)]) {
            try {
              const infos = describeCertificates(input, 'input');
              expect(infos.length).to.be.greaterThan(0);
            } catch (error) {
              expect(error).to.be.instanceOf(Error);
              expect((error as Error).message).to.match(/^input/);
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
