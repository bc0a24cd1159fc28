// The shipped alerts (manifests/monitoring/prometheusrule.yaml) under promtool, built from the Go module proxy
// by testenv: the rules are valid, each alert's unit test (test/monitoring/alerts.promtool.yaml) passes, every
// alert has a unit test that expects it to fire and a runbook in docs/runbooks/<alert>.md that it names.
import { copyFile, mkdtemp, readFile, rm, writeFile, access } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { parse, stringify } from 'yaml';
import { runPromtool } from '@skr-watcher/testenv';
import { ROOT, shippedRules, type RuleGroups } from '../support/monitoring.js';

const UNIT_TESTS = join(ROOT, 'test/monitoring/alerts.promtool.yaml');

describe('shipped alert rules under promtool', function () {
  // A cold first run builds promtool from the Go module proxy (minutes); later runs take it from the cache.
  this.timeout(3_600_000);
  let dir: string;
  let rules: RuleGroups;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'skr-rules-'));
    rules = await shippedRules();
    await writeFile(join(dir, 'rules.yaml'), stringify(rules));
    await copyFile(UNIT_TESTS, join(dir, 'alerts.promtool.yaml'));
  });
  after(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('promtool check rules accepts the PrometheusRule spec', async () => {
    const { code, output } = await runPromtool(['check', 'rules', 'rules.yaml'], { cwd: dir });
    expect(code, output).to.equal(0);
    expect(output).to.match(/SUCCESS: \d+ rules found/);
  });

  it('promtool test rules passes every alert unit test', async () => {
    const { code, output } = await runPromtool(['test', 'rules', 'alerts.promtool.yaml'], { cwd: dir });
    expect(code, output).to.equal(0);
    expect(output).to.include('SUCCESS');
  });

  it('every alert has a unit test that expects it to fire and a runbook it names', async () => {
    const tests = parse(await readFile(UNIT_TESTS, 'utf8')) as {
      tests: { alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[] }[];
    };
    const fired = new Set(
      tests.tests.flatMap((test) =>
        (test.alert_rule_test ?? []).filter((t) => t.exp_alerts.length > 0).map((t) => t.alertname),
      ),
    );
    const alerts = rules.groups.flatMap((group) => group.rules.flatMap((rule) => (rule.alert ? [rule] : [])));
    expect(alerts.length).to.be.at.least(9);
    for (const alert of alerts) {
      const name = alert.alert as string;
      expect(fired.has(name), `${name} has a unit test that expects it to fire`).to.equal(true);
      expect(alert.annotations?.['runbook'], name).to.equal(`docs/runbooks/${name}.md`);
      await access(join(ROOT, 'docs/runbooks', `${name}.md`));
      const runbook = await readFile(join(ROOT, 'docs/runbooks', `${name}.md`), 'utf8');
      expect(runbook.startsWith(`# ${name}\n`), `${name}.md starts with its title`).to.equal(true);
    }
  });

  it('a unit test that expects the wrong thing fails (promtool is really checking)', async () => {
    const broken = (await readFile(UNIT_TESTS, 'utf8')).replace(
      'summary: 3 Kymas have been in state Error for 15 minutes.',
      'summary: 4 Kymas have been in state Error for 15 minutes.',
    );
    await writeFile(join(dir, 'broken.promtool.yaml'), broken);
    const { code, output } = await runPromtool(['test', 'rules', 'broken.promtool.yaml'], { cwd: dir });
    expect(code).to.not.equal(0);
    expect(output).to.include('SkrKymasInError');
  });
});
