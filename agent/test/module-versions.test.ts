// The order of module versions that the no-downgrade rule follows: semantic versioning's, pre-releases included.
import { expect } from 'chai';
import { compareVersions } from '../src/reconcile/modules/resolution.js';

describe('module version order', () => {
  it('orders numeric pre-release identifiers as numbers: rc.10 follows rc.9 and rc.2', () => {
    expect(compareVersions('1.0.0-rc.10', '1.0.0-rc.2')).to.equal(1);
    expect(compareVersions('1.0.0-rc.9', '1.0.0-rc.10')).to.equal(-1);
  });

  it('puts a pre-release before its release, and compares the three numbers first', () => {
    expect(compareVersions('1.0.0-rc.1', '1.0.0')).to.equal(-1);
    expect(compareVersions('1.10.0', '1.9.9')).to.equal(1);
    expect(compareVersions('v2.0.0', '2.0.0')).to.equal(0);
    expect(compareVersions('1.0.0+build.5', '1.0.0')).to.equal(0);
  });

  it('answers undefined for what is not a semantic version', () => {
    expect(compareVersions('latest', '1.0.0')).to.equal(undefined);
    expect(compareVersions('1.0', '1.0.0')).to.equal(undefined);
  });
});
