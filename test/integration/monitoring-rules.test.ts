// The shipped alerts under promtool, built from the Go module proxy by testenv: the KCP rules
// (manifests/monitoring/prometheusrule.yaml, test/monitoring/alerts.promtool.yaml) and the SKR webhook's rules
// (manifests/monitoring/skr/prometheusrule.yaml, test/monitoring/skr-alerts.promtool.yaml) are valid, each alert's
// unit tests pass, and every alert has a unit test that expects it to fire and a runbook_url that links
// docs/runbooks/<alert>.md, which exists.
import { copyFile, mkdtemp, readFile, rm, writeFile, access } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { parse, stringify } from 'yaml';
import { runPromtool } from '@skr-watcher/testenv';
import {
  ROOT,
  RULE_FILE,
  RUNBOOK_URL_BASE,
  SKR_RULE_FILE,
  shippedRules,
  type RuleGroups,
} from '../support/monitoring.js';

const SUITES = [
  {
    what: 'KCP',
    ruleFile: RULE_FILE,
    rules: 'rules.yaml',
    unitTests: 'alerts.promtool.yaml',
    least: 10,
  },
  {
    what: 'SKR webhook',
    ruleFile: SKR_RULE_FILE,
    rules: 'skr-rules.yaml',
    unitTests: 'skr-alerts.promtool.yaml',
    least: 4,
  },
];

for (const suite of SUITES) {
  describe(`shipped ${suite.what} alert rules under promtool`, function () {
    // A cold first run builds promtool from the Go module proxy (minutes); later runs take it from the cache.
    this.timeout(3_600_000);
    const unitTests = join(ROOT, 'test/monitoring', suite.unitTests);
    let dir: string;
    let rules: RuleGroups;

    before(async () => {
      dir = await mkdtemp(join(tmpdir(), 'skr-rules-'));
      rules = await shippedRules(suite.ruleFile);
      await writeFile(join(dir, suite.rules), stringify(rules));
      await copyFile(unitTests, join(dir, suite.unitTests));
    });
    after(async () => {
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it('promtool check rules accepts the PrometheusRule spec', async () => {
      const { code, output } = await runPromtool(['check', 'rules', suite.rules], { cwd: dir });
      expect(code, output).to.equal(0);
      expect(output).to.match(/SUCCESS: \d+ rules found/);
    });

    it('promtool test rules passes every alert unit test', async () => {
      const { code, output } = await runPromtool(['test', 'rules', suite.unitTests], { cwd: dir });
      expect(code, output).to.equal(0);
      expect(output).to.include('SUCCESS');
    });

    it('every alert has a unit test that expects it to fire and a runbook_url to its runbook', async () => {
      const tests = parse(await readFile(unitTests, 'utf8')) as {
        tests: { alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[] }[];
      };
      const fired = new Set(
        tests.tests.flatMap((test) =>
          (test.alert_rule_test ?? []).filter((t) => t.exp_alerts.length > 0).map((t) => t.alertname),
        ),
      );
      const alerts = rules.groups.flatMap((group) =>
        group.rules.flatMap((rule) => (rule.alert ? [rule] : [])),
      );
      expect(alerts.length).to.be.at.least(suite.least);
      for (const alert of alerts) {
        const name = alert.alert as string;
        expect(fired.has(name), `${name} has a unit test that expects it to fire`).to.equal(true);
        expect(alert.annotations?.['runbook_url'], name).to.equal(`${RUNBOOK_URL_BASE}${name}.md`);
        await access(join(ROOT, 'docs/runbooks', `${name}.md`));
        const runbook = await readFile(join(ROOT, 'docs/runbooks', `${name}.md`), 'utf8');
        expect(runbook.startsWith(`# ${name}\n`), `${name}.md starts with its title`).to.equal(true);
      }
    });
  });
}

describe('promtool unit tests really check', function () {
  this.timeout(3_600_000);

  it('a unit test that expects the wrong thing fails', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'skr-rules-'));
    try {
      await writeFile(join(dir, 'rules.yaml'), stringify(await shippedRules()));
      const broken = (await readFile(join(ROOT, 'test/monitoring/alerts.promtool.yaml'), 'utf8')).replace(
        'summary: 3 Kymas have been in state Error for 15 minutes.',
        'summary: 4 Kymas have been in state Error for 15 minutes.',
      );
      await writeFile(join(dir, 'broken.promtool.yaml'), broken);
      const { code, output } = await runPromtool(['test', 'rules', 'broken.promtool.yaml'], { cwd: dir });
      expect(code).to.not.equal(0);
      expect(output).to.include('SkrKymasInError');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
