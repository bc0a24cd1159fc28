// ModuleConfig names: deterministic, valid object names, and distinct for distinct (Kyma, module) pairs.
import { expect } from 'chai';
import fc from 'fast-check';
import { moduleConfigName } from '../src/reconcile/index.js';

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
const kymaName = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,251}[a-z0-9])?$/);
const moduleName = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,62}[a-z0-9])?$/);

describe('moduleConfigName', function () {
  it('keeps the pair readable and appends a hash', function () {
    expect(moduleConfigName('skr1', 'sample')).to.match(/^skr1-sample-[0-9a-f]{8}$/);
    expect(moduleConfigName('skr1', 'sample')).to.equal(moduleConfigName('skr1', 'sample'));
  });

  it('tells apart pairs that join to the same text', function () {
    expect(moduleConfigName('a-b', 'c')).to.not.equal(moduleConfigName('a', 'b-c'));
  });

  it('is always a valid object name of at most 253 characters', function () {
    fc.assert(
      fc.property(kymaName, moduleName, (kyma, module) => {
        const name = moduleConfigName(kyma, module);
        return name.length <= 253 && DNS_SUBDOMAIN.test(name);
      }),
      { numRuns: 2_000 },
    );
  });

  it('differs for different pairs, also when long names are cut', function () {
    fc.assert(
      fc.property(kymaName, moduleName, kymaName, moduleName, (k1, m1, k2, m2) => {
        fc.pre(k1 !== k2 || m1 !== m2);
        return moduleConfigName(k1, m1) !== moduleConfigName(k2, m2);
      }),
      { numRuns: 2_000 },
    );
    const long = 'k'.repeat(250);
    expect(moduleConfigName(long, 'one')).to.not.equal(moduleConfigName(long, 'two'));
  });
});
