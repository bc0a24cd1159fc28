// The shipped monitoring files as tests read them (decision 023).
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse } from 'yaml';

export const ROOT = new URL('../../', import.meta.url).pathname;
/** The KCP component: what a Prometheus that scrapes the agent only loads. */
export const RULE_FILE = join(ROOT, 'manifests/monitoring/prometheusrule.yaml');
export const DASHBOARD_DIR = join(ROOT, 'manifests/monitoring/dashboards');
/** The SKR side: what a Prometheus in each SKR, scraping the webhook, loads. */
export const SKR_RULE_FILE = join(ROOT, 'manifests/monitoring/skr/prometheusrule.yaml');
export const SKR_DASHBOARD_DIR = join(ROOT, 'manifests/monitoring/skr/dashboards');
/** Where every alert's runbook_url points: docs/runbooks/<alert>.md of this repository. */
export const RUNBOOK_URL_BASE = 'https://github.com/example/skr-watcher/blob/main/docs/runbooks/';

export interface RuleGroups {
  groups: {
    name: string;
    rules: {
      alert?: string;
      record?: string;
      expr: string;
      for?: string;
      annotations?: Record<string, string>;
    }[];
  }[];
}

/** A PrometheusRule's spec (default: the KCP one): what a Prometheus loads as a rule file. */
export async function shippedRules(file = RULE_FILE): Promise<RuleGroups> {
  const rule = parse(await readFile(file, 'utf8')) as { kind: string; spec: RuleGroups };
  if (rule.kind !== 'PrometheusRule') throw new Error(`${file} holds a ${rule.kind}, not a PrometheusRule`);
  return rule.spec;
}
