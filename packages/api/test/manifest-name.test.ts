import { strict as assert } from 'node:assert';
import { fnv1Hash32, manifestName } from '../src/index.js';

describe('Manifest names (upstream scheme)', () => {
  it('gives the name upstream gives: kyma, last component segment, FNV-1 of component + module', () => {
    assert.equal(
      manifestName('kyma-project.io/module/some-module', 'default-id', 'module1'),
      'default-id-some-module-1831772875',
    );
  });

  it('hashes with FNV-1, not FNV-1a (the two differ on the same input)', () => {
    // FNV-1 of "a" is 0x050c5d7e; FNV-1a of "a" would be 0xe40c292c.
    assert.equal(fnv1Hash32('a'), 0x050c5d7e);
    assert.equal(fnv1Hash32(''), 0x811c9dc5);
  });

  it('cuts names of 63 characters or more to 62 and trims trailing dashes, hash included', () => {
    const name = manifestName(
      'kyma-project.io/module/template-operator',
      '6a1f0e7c-2b8d-4a55-9d3e-3c2f1b0a9e77',
      'template-operator',
    );
    assert.equal(name, '6a1f0e7c-2b8d-4a55-9d3e-3c2f1b0a9e77-template-operator-2235966');
    assert.equal(name.length, 62);
    // A cut that ends on the dash before the hash loses the dash too.
    const kyma = 'k'.repeat(62 - '-mod'.length);
    assert.equal(manifestName('x/mod', kyma, 'm'), `${kyma}-mod`);
  });
});
