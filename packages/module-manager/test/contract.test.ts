// The contract every module manager keeps, whatever its language: contract-cases.json is run here against the
// TypeScript kit and by api/go/modulemanager/contract_test.go against the Go helper, so both name SyncResources,
// turn rendered objects into items, and report conditions alike.
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import type { Condition } from '@skr-watcher/api';
import { conditionTypeOf, syncResourceNameOf, toSyncItems, type Rendered } from '../src/index.js';
import {
  conditionChanged,
  nextCondition,
  reportOf,
  type ConditionInput,
  type SyncResourceReport,
} from '../src/status.js';

interface ContractCases {
  syncResourceNames: { manager: string; moduleConfig: string; expected: string }[];
  conditionTypes: { manager: string; expected: string }[];
  items: { name: string; rendered: Rendered[]; items?: unknown[]; error?: string }[];
  reports: {
    name: string;
    syncResource: SyncResourceReport & { metadata: { name: string } };
    expected: ConditionInput;
  }[];
  conditions: {
    name: string;
    type: string;
    input: ConditionInput;
    observedGeneration: number;
    now: string;
    previous?: Condition;
    expected: Condition;
    changed: boolean;
  }[];
}

const cases = JSON.parse(
  readFileSync(new URL('./contract-cases.json', import.meta.url), 'utf8'),
) as ContractCases;

describe('module manager contract (shared with the Go helper)', () => {
  for (const c of cases.syncResourceNames) {
    it(`names the SyncResource of ${c.manager} and a ${c.moduleConfig.length}-character ModuleConfig name`, () => {
      expect(syncResourceNameOf(c.manager, c.moduleConfig)).to.equal(c.expected);
    });
  }

  for (const c of cases.conditionTypes) {
    it(`gives ${c.manager} the condition type ${c.expected}`, () => {
      expect(conditionTypeOf(c.manager)).to.equal(c.expected);
    });
  }

  for (const c of cases.items) {
    it(`items: ${c.name}`, () => {
      if (c.error !== undefined) expect(() => toSyncItems(c.rendered)).to.throw(c.error);
      else expect(toSyncItems(c.rendered)).to.deep.equal(c.items);
    });
  }

  for (const c of cases.reports) {
    it(`report: ${c.name}`, () => {
      expect(reportOf(c.syncResource, c.syncResource.metadata.name)).to.deep.equal(c.expected);
    });
  }

  for (const c of cases.conditions) {
    it(`condition: ${c.name}`, () => {
      const next = nextCondition(c.type, c.input, c.observedGeneration, c.previous, new Date(c.now));
      // The kit writes milliseconds; the API server (and Go's metav1.Time) keep seconds.
      expect({
        ...next,
        lastTransitionTime: next.lastTransitionTime.replace(/\.\d{3}Z$/, 'Z'),
      }).to.deep.equal(c.expected);
      expect(conditionChanged(c.previous, next)).to.equal(c.changed);
    });
  }
});
