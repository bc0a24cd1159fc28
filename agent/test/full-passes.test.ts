// The memory of the no-op rule (reconcile/kyma/pass-inputs.ts): which passes of a Kyma may leave its SKR alone.
// What the rule saves on real planes is test/integration/noop-pass.test.ts's.
import { expect } from 'chai';
import { FullPasses } from '../src/reconcile/kyma/pass-inputs.js';

const KEY = 'kcp-system/k';
const HOUR = 60 * 60_000;

describe('the last full passes of the no-op rule', () => {
  it('covers a pass with the inputs of the last full pass within the re-apply interval, and no other', () => {
    const passes = new FullPasses(HOUR);
    expect(passes.covers(KEY, 'a', 0), 'a Kyma never passed in full (a restart)').to.equal(false);
    passes.record(KEY, 'a', 1_000);
    expect(passes.covers(KEY, 'a', 1_000 + HOUR - 1)).to.equal(true);
    expect(passes.covers(KEY, 'b', 2_000), 'other inputs').to.equal(false);
    expect(passes.covers('kcp-system/other', 'a', 2_000), 'another Kyma').to.equal(false);
    expect(passes.covers(KEY, 'a', 1_000 + HOUR), 'the re-apply is due').to.equal(false);
  });

  it('forgets a Kyma put in doubt, and remembers nothing when every pass is to be full (interval 0)', () => {
    const passes = new FullPasses(HOUR);
    passes.record(KEY, 'a', 0);
    passes.distrust(KEY);
    expect(passes.covers(KEY, 'a', 1)).to.equal(false);
    expect(passes.size).to.equal(0);
    const never = new FullPasses(0);
    never.record(KEY, 'a', 0);
    expect(never.covers(KEY, 'a', 0)).to.equal(false);
    expect(never.size).to.equal(0);
  });
});
