// Module names no catalog knows, which an SKR user may list by the thousand in their own Kyma: the Kyma's status
// lists a bounded number of them and counts the rest.
import { expect } from 'chai';
import type { KymaModuleStatus } from '@skr-watcher/api';
import { boundUnknownModules, MAX_UNKNOWN_MODULE_ENTRIES } from '../src/reconcile/modules/modules.js';
import { isUnknownModule } from '../src/reconcile/status.js';

const unknown = (name: string): KymaModuleStatus => ({
  name,
  state: 'Error',
  message: `ModuleReleaseMetaNotFound: ModuleReleaseMeta kcp-system/${name} not found`,
});

describe('modules no catalog knows', () => {
  it('lists at most the bound of them, the first by name; the last of those says how many more', () => {
    const known: KymaModuleStatus = {
      name: 'keda',
      state: 'Ready',
      version: '1.0.0',
      template: { kind: 'ModuleTemplate', metadata: { name: 'keda-1.0.0' } },
    };
    const names = Array.from({ length: 3_000 }, (_, index) => `made-up-${String(index).padStart(4, '0')}`);
    const bounded = boundUnknownModules([...names.reverse().map(unknown), known]);
    expect(bounded).to.have.length(MAX_UNKNOWN_MODULE_ENTRIES + 1);
    expect(
      bounded
        .filter(isUnknownModule)
        .map((status) => status.name)
        .sort(),
    ).to.deep.equal(names.sort().slice(0, MAX_UNKNOWN_MODULE_ENTRIES));
    expect(bounded.find((status) => status.name === 'made-up-0009')?.message).to.include(
      `and ${3_000 - MAX_UNKNOWN_MODULE_ENTRIES} more modules no catalog knows`,
    );
    expect(bounded).to.deep.include(known);
  });

  it('leaves a status with few of them as it is, and never counts a module that was resolved once', () => {
    const gone: KymaModuleStatus = {
      name: 'was-known',
      state: 'Warning',
      version: '1.0.0',
      template: { kind: 'ModuleTemplate', metadata: { name: 'was-known-1.0.0' } },
      message: 'ModuleReleaseMetaNotFound: ModuleReleaseMeta kcp-system/was-known not found',
    };
    expect(isUnknownModule(gone)).to.equal(false);
    const statuses = [unknown('a'), unknown('b'), gone];
    expect(boundUnknownModules(statuses)).to.equal(statuses);
  });
});
