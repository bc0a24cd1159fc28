// Maintenance windows in upstream's policy format, on an injected clock (2026-11-26 is a Thursday).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import {
  gateUpgrade,
  parsePolicy,
  PolicyError,
  resolveWindow,
  runtimeOfKyma,
  type UpgradeQuestion,
} from '../src/rollout/maintenance-window.js';
import { loadPolicy } from '../src/rollout/policy-file.js';

const MIN = 20 * 60_000;
const SATURDAY_EVENING = { days: ['Sat'], begin: '21:00:00+00:00', end: '23:00:00+00:00' };
const policyOf = (value: unknown) => parsePolicy(JSON.stringify(value));
const at = (iso: string) => new Date(iso);
const window = (policy: ReturnType<typeof parsePolicy>, runtime: object, now: string) => {
  const resolved = resolveWindow(policy, runtime, at(now), MIN);
  return resolved && { ...resolved, begin: resolved.begin.toISOString(), end: resolved.end.toISOString() };
};

describe('maintenance windows', () => {
  const onlyDefault = policyOf({ rules: [], default: SATURDAY_EVENING });

  it('gives the next default window, and says it is open inside it', () => {
    expect(window(onlyDefault, {}, '2026-11-26T12:00:00Z')).to.deep.equal({
      begin: '2026-11-28T21:00:00.000Z',
      end: '2026-11-28T23:00:00.000Z',
      active: false,
      source: 'default',
    });
    expect(window(onlyDefault, {}, '2026-11-28T21:30:00Z')?.active).to.equal(true);
  });

  it('skips an open window with less than the minimum size left', () => {
    expect(window(onlyDefault, {}, '2026-11-28T22:45:00Z')).to.include({
      begin: '2026-12-05T21:00:00.000Z',
      active: false,
    });
  });

  it('follows a window across midnight and honours the offset of its times', () => {
    const late = policyOf({ rules: [], default: { days: ['Fri'], begin: '23:00:00Z', end: '01:00:00Z' } });
    expect(window(late, {}, '2026-11-28T00:30:00Z')).to.deep.equal({
      begin: '2026-11-27T23:00:00.000Z',
      end: '2026-11-28T01:00:00.000Z',
      active: true,
      source: 'default',
    });
    // Monday 01:00 at +02:00 is Sunday 23:00 UTC.
    const berlin = policyOf({
      rules: [],
      default: { days: ['Mon'], begin: '01:00:00+02:00', end: '03:00:00+02:00' },
    });
    expect(window(berlin, {}, '2026-11-29T23:30:00Z')).to.deep.equal({
      begin: '2026-11-29T23:00:00.000Z',
      end: '2026-11-30T01:00:00.000Z',
      active: true,
      source: 'default',
    });
  });

  it('uses only the first matching rule (any non-empty field, unanchored), and the default when it yields none', () => {
    const policy = policyOf({
      rules: [
        {
          match: { plan: 'trial', region: 'europe' },
          windows: [{ days: ['Thu'], begin: '13:00:00Z', end: '15:00:00Z' }],
        },
        { match: { plan: 'paid' }, windows: [{ days: ['Fri'], begin: '00:00:00Z', end: '04:00:00Z' }] },
        {
          match: { globalAccountID: '^ga-past$' },
          windows: [{ begin: '2026-01-01T00:00:00Z', end: '2026-01-02T00:00:00Z' }],
        },
      ],
      default: SATURDAY_EVENING,
    });
    const now = '2026-11-26T12:00:00Z';
    // plan does not match the first rule but region does (unanchored): the first rule, not the second.
    expect(window(policy, { plan: 'paid', region: 'europe-west1' }, now)).to.deep.include({
      begin: '2026-11-26T13:00:00.000Z',
      source: 'rules[0]',
    });
    expect(window(policy, { plan: 'paid' }, now)).to.deep.include({ source: 'rules[1]' });
    // Its only window is in the past: the default.
    expect(window(policy, { globalAccountID: 'ga-past' }, now)).to.deep.include({ source: 'default' });
    expect(window(policy, {}, now)).to.deep.include({ source: 'default' });
  });

  it('reads absolute windows (no days)', () => {
    const policy = policyOf({
      rules: [],
      default: { begin: '2026-11-26T10:00:00Z', end: '2026-11-26T14:00:00+00:00' },
    });
    expect(window(policy, {}, '2026-11-26T12:00:00Z')?.active).to.equal(true);
    expect(window(policy, {}, '2026-11-26T13:50:00Z')).to.equal(undefined);
  });

  it('refuses a malformed policy with the place of the fault', () => {
    const cases: [string, RegExp][] = [
      ['{"rules": [', /not JSON/],
      [JSON.stringify({ rules: [] }), /at default/],
      [
        JSON.stringify({ default: { days: ['Monday'], begin: '01:00:00Z', end: '02:00:00Z' } }),
        /default\.days/,
      ],
      [JSON.stringify({ default: { days: ['Mon'], begin: '25:00:00Z', end: '02:00:00Z' } }), /25:00:00Z/],
      [
        JSON.stringify({ default: { begin: '2026-01-02T00:00:00Z', end: '2026-01-01T00:00:00Z' } }),
        /not after/,
      ],
      [
        JSON.stringify({ rules: [{ match: { plan: '(' }, windows: [] }], default: SATURDAY_EVENING }),
        /rules\.0\.match\.plan/,
      ],
      [JSON.stringify({ default: SATURDAY_EVENING, extra: 1 }), /invalid/],
      // zod's own English message, not the bare "Invalid input" its functional API gives without a locale.
      [
        JSON.stringify({ default: { ...SATURDAY_EVENING, begin: 5 } }),
        /default\.begin: Invalid input: expected string, received number/,
      ],
    ];
    for (const [text, message] of cases) expect(() => parsePolicy(text), text).to.throw(PolicyError, message);
  });

  it('builds the runtime from the Kyma labels upstream uses', () => {
    expect(
      runtimeOfKyma({
        'kyma-project.io/global-account-id': 'ga',
        'kyma-project.io/broker-plan-name': 'trial',
        'kyma-project.io/region': 'eu',
        other: 'x',
      }),
    ).to.deep.equal({ globalAccountID: 'ga', plan: 'trial', region: 'eu' });
  });

  describe('the upgrade gate', () => {
    const base: UpgradeQuestion = {
      requiresDowntime: true,
      skipMaintenanceWindows: false,
      installedVersion: '1.0.0',
      targetVersion: '1.1.0',
      runtime: {},
      now: at('2026-11-26T12:00:00Z'),
      policy: onlyDefault,
      minWindowMs: MIN,
    };

    it('holds an upgrade that needs downtime until the window opens, then lets it through', () => {
      const held = gateUpgrade(base);
      expect(held.kind).to.equal('wait');
      expect(held.kind === 'wait' && held.opensAt?.toISOString()).to.equal('2026-11-28T21:00:00.000Z');
      expect(held.kind === 'wait' && held.message).to.match(
        /from 1\.0\.0 to 1\.1\.0: opens 2026-11-28T21:00/,
      );
      expect(gateUpgrade({ ...base, now: at('2026-11-28T21:05:00Z') })).to.deep.equal({ kind: 'proceed' });
    });

    it('never holds a new install, an upgrade without downtime, the same version or a Kyma that skips windows', () => {
      for (const change of [
        { installedVersion: undefined },
        { requiresDowntime: false },
        { targetVersion: '1.0.0' },
        { skipMaintenanceWindows: true },
      ])
        expect(gateUpgrade({ ...base, ...change }), JSON.stringify(change)).to.deep.equal({
          kind: 'proceed',
        });
    });

    it('is an error for this module when the policy cannot be read', () => {
      expect(gateUpgrade({ ...base, policy: { error: 'policy.json: not JSON' } })).to.deep.equal({
        kind: 'error',
        message: 'cannot tell whether a maintenance window is open: policy.json: not JSON',
      });
      expect(gateUpgrade({ ...base, policy: undefined }).kind).to.equal('error');
    });
  });
});

describe('the maintenance policy file', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'skr-policy-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reads policy.json from the directory, and keeps the reason when it cannot', async () => {
    expect(await loadPolicy(dir)).to.deep.equal({ error: `${join(dir, 'policy.json')} does not exist` });
    await writeFile(join(dir, 'policy.json'), '{"default": {"days": ["Sat"]}}');
    expect(await loadPolicy(dir))
      .to.have.property('error')
      .that.matches(/invalid at default\.begin/);
    await writeFile(join(dir, 'policy.json'), JSON.stringify({ rules: [], default: SATURDAY_EVENING }));
    const policy = await loadPolicy(dir);
    expect('error' in policy, JSON.stringify(policy)).to.equal(false);
    await writeFile(join(dir, 'policy.json'), Buffer.alloc(1024 * 1024 + 1, 0x20));
    expect(await loadPolicy(dir))
      .to.have.property('error')
      .that.matches(/more than the 1048576 allowed/);
  });
});
