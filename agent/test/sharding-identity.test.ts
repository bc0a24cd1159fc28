// Shard identities: what may name a replica (and its Lease), and the default one made from the host name.
import { expect } from 'chai';
import { checkShardIdentity, defaultShardIdentity, validShardIdentity } from '../src/sharding/identity.js';

describe('shard identity', () => {
  it('accepts DNS labels of up to 63 characters and nothing else', () => {
    for (const good of ['a', 'agent-0', 'skr-agent-7f9c2', 'a'.repeat(63)]) {
      expect(validShardIdentity(good), good).to.equal(true);
    }
    for (const bad of ['', 'Agent', '-agent', 'agent-', 'agent_0', 'agent.0', 'a'.repeat(64)]) {
      expect(validShardIdentity(bad), bad).to.equal(false);
    }
  });

  it('refuses an invalid identity with a message that says what one must be', () => {
    expect(() => checkShardIdentity('Agent_0')).to.throw(
      /"Agent_0" must be a DNS label of at most 63 characters/,
    );
    expect(() => checkShardIdentity('agent-0')).not.to.throw();
  });

  it('makes the default from the host name and six random characters, always a valid identity', () => {
    const fixed = () => 0.123456789;
    const suffix = (0.123456789).toString(36).slice(2, 8);
    expect(defaultShardIdentity('skr-agent-5d8f-x2', fixed)).to.equal(`skr-agent-5d8f-x2-${suffix}`);
    expect(defaultShardIdentity('Pod_Name.example', fixed)).to.equal(`pod-name-example-${suffix}`);
    expect(defaultShardIdentity('---', fixed)).to.equal(`skr-agent-${suffix}`);
    // A random number with few digits still gives six characters.
    expect(defaultShardIdentity('host', () => 0.5)).to.equal('host-i00000');
    for (const host of ['x'.repeat(80), `${'a'.repeat(53)}--b`, 'UPPER.case', '']) {
      expect(validShardIdentity(defaultShardIdentity(host)), host).to.equal(true);
    }
  });
});
