// The shipped monitoring files as tests read them (decision 023).
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse } from 'yaml';

export const ROOT = new URL('../../', import.meta.url).pathname;
export const RULE_FILE = join(ROOT, 'manifests/monitoring/prometheusrule.yaml');
export const DASHBOARD_DIR = join(ROOT, 'manifests/monitoring/dashboards');

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

/** The PrometheusRule's spec: what a Prometheus loads as a rule file. */
export async function shippedRules(): Promise<RuleGroups> {
  const rule = parse(await readFile(RULE_FILE, 'utf8')) as { kind: string; spec: RuleGroups };
  if (rule.kind !== 'PrometheusRule')
    throw new Error(`${RULE_FILE} holds a ${rule.kind}, not a PrometheusRule`);
  return rule.spec;
}
