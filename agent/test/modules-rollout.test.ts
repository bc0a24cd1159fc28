// Module rollouts the user controls (decision 025) on a real KCP, a real SKR and a real registry: an upgrade whose
// template requiresDowntime waits for the Kyma's maintenance window (clock injected, nothing slept) and is applied in
// it; skipMaintenanceWindows lets it through; an unreadable policy fails only the modules that need it; and a
// template's customStateCheck maps the default CR's fields onto the module's state.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { createRegistry } from '@skr-watcher/telemetry';
import { custom, kymaRef } from './support/planes.js';
import { crdYaml, docs, configMapYaml, mergePatch, moduleSuite, type Json } from './support/modules.js';
import { loadPolicy, type LoadedPolicy } from '../src/rollout/policy-file.js';

const SATURDAY_EVENING = { days: ['Sat'], begin: '21:00:00+00:00', end: '23:00:00+00:00' };
/** A Thursday; the default window opens on Saturday 2026-11-28 at 21:00 UTC. */
const THURSDAY = new Date('2026-11-26T12:00:00Z');
const IN_WINDOW = new Date('2026-11-28T21:05:00Z');

describe('module rollouts: maintenance windows and customStateCheck (real planes and registry)', function () {
  this.timeout(300_000);
  const suite = moduleSuite();
  let dir: string;
  let now = THURSDAY;
  let policy: LoadedPolicy | undefined;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'skr-rollout-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  beforeEach(async () => {
    now = THURSDAY;
    await writeFile(join(dir, 'policy.json'), JSON.stringify({ rules: [], default: SATURDAY_EVENING }));
    policy = await loadPolicy(dir);
  });

  /** Module names are lower-case letters: one per test. */
  const unique = (base: string) =>
    `${base}-${String.fromCharCode(97 + (suite.state.counter % 26)).repeat(2)}${process.pid
      .toString(26)
      .replace(/[0-9]/g, (d) => String.fromCharCode(107 + Number(d)))}`;
  const publishVersion = (module: string, version: string, requiresDowntime: boolean) =>
    suite.publish({
      moduleName: module,
      version,
      requiresDowntime,
      rawManifest: configMapYaml(`${module}-config`, 'kyma-system', { version }),
    });
  const start = async () => {
    await suite.start({}, { clock: () => now });
    suite.state.installation!.maintenance = { policy: () => policy, minWindowMs: 20 * 60_000 };
  };
  const entry = (kyma: string, module: string) => suite.moduleStatus(kyma, module);
  const readyAt = (kyma: string, module: string, version: string) =>
    suite.reconcileUntil(
      kyma,
      async () => {
        const status = await entry(kyma, module);
        return status?.state === 'Ready' && status.version === version;
      },
      `${module} ${version} Ready`,
    );

  it('holds an upgrade that needs downtime until the window opens, keeping the running version, then applies it', async () => {
    const module = unique('window');
    await publishVersion(module, '1.0.0', true);
    await suite.kyma('w1', [{ name: module }]);
    await start();
    // A new install never waits, even with requiresDowntime.
    await readyAt('w1', module, '1.0.0');

    await publishVersion(module, '2.0.0', true);
    await suite.reconcileUntil(
      'w1',
      async () => (await entry('w1', module))?.maintenance === true,
      'upgrade held for the window',
    );
    for (let pass = 0; pass < 3; pass++)
      await suite.state.manager!.reconciler.reconcile(`${suite.state.ns}/w1`);
    const held = await entry('w1', module);
    expect(held).to.deep.include({ state: 'Ready', version: '1.0.0', maintenance: true });
    expect(held?.message).to.match(/from 1\.0\.0 to 2\.0\.0: opens 2026-11-28T21:00:00\.000Z \(default\)/);
    expect((await suite.manifests())[0]?.spec.version).to.equal('1.0.0');

    now = IN_WINDOW;
    await readyAt('w1', module, '2.0.0');
    expect((await entry('w1', module))?.maintenance).to.not.equal(true);
    expect((await suite.manifests())[0]?.spec.version).to.equal('2.0.0');
  });

  it('lets a Kyma with skipMaintenanceWindows upgrade at once', async () => {
    const module = unique('skip');
    await publishVersion(module, '1.0.0', true);
    const kyma = await suite.kyma('w2', [{ name: module }]);
    await custom(suite.planes.kcp).patchNamespacedCustomObject(
      { ...kymaRef(suite.state.ns, kyma.metadata.name), body: { spec: { skipMaintenanceWindows: true } } },
      mergePatch,
    );
    await start();
    await readyAt('w2', module, '1.0.0');
    await publishVersion(module, '2.0.0', true);
    await readyAt('w2', module, '2.0.0');
  });

  it('an unreadable policy is an Error on the modules whose upgrade needs it, and only on those', async () => {
    const held = unique('broken');
    const free = unique('free');
    await publishVersion(held, '1.0.0', true);
    await publishVersion(free, '1.0.0', false);
    await suite.kyma('w3', [{ name: held }, { name: free }]);
    await start();
    await readyAt('w3', held, '1.0.0');
    await readyAt('w3', free, '1.0.0');

    await writeFile(join(dir, 'policy.json'), '{"rules": [], "default": {"days": ["Someday"]}}');
    policy = await loadPolicy(dir);
    await publishVersion(held, '2.0.0', true);
    await publishVersion(free, '2.0.0', false);
    await readyAt('w3', free, '2.0.0');
    await suite.reconcileUntil(
      'w3',
      async () => (await entry('w3', held))?.state === 'Error',
      'the module that needs the policy in Error',
    );
    const failed = await entry('w3', held);
    expect(failed?.message).to.match(
      /cannot tell whether a maintenance window is open: .*invalid at default/,
    );
    expect(
      (await suite.manifests()).find(
        (m: Json) => m.metadata.labels['operator.kyma-project.io/module-name'] === held,
      )?.spec.version,
    ).to.equal('1.0.0');
  });

  it('counts installs, upgrades and removals in skr_agent_module_operations_total', async () => {
    const module = unique('counted');
    const registry = createRegistry();
    const count = async (operation: string, outcome: string) => {
      const metric = await registry.getSingleMetric('skr_agent_module_operations_total')?.get();
      return (
        metric?.values.find((v) => v.labels['operation'] === operation && v.labels['outcome'] === outcome)
          ?.value ?? 0
      );
    };
    await publishVersion(module, '1.0.0', false);
    await suite.kyma('w5', [{ name: module }]);
    await suite.start({ metrics: registry });
    await readyAt('w5', module, '1.0.0');
    // More passes over an installed module count nothing more.
    for (let pass = 0; pass < 2; pass++)
      await suite.state.manager!.reconciler.reconcile(`${suite.state.ns}/w5`);
    expect(await count('install', 'success')).to.equal(1);
    await publishVersion(module, '2.0.0', false);
    await readyAt('w5', module, '2.0.0');
    expect(await count('upgrade', 'success')).to.equal(1);
    await suite.skrModules([]);
    await suite.reconcileUntil('w5', async () => (await suite.manifests()).length === 0, 'module removed');
    expect(await count('delete', 'success')).to.equal(1);
    expect(await count('install', 'error')).to.equal(0);
  });

  it("maps the default CR's fields onto the module's state by the template's customStateCheck", async () => {
    const module = unique('custom');
    const group = `${module}.test.io`;
    const kind = 'Probe';
    const published = await suite.publish({
      moduleName: module,
      version: '1.0.0',
      rawManifest: docs(crdYaml(group, kind)),
      defaultCr: `apiVersion: ${group}/v1\nkind: ${kind}\nmetadata:\n  name: ${module}-default\n  namespace: kyma-system\nspec: {}\n`,
    });
    const template = structuredClone(published.moduleTemplate) as Json;
    template.spec.customStateCheck = [
      { jsonPath: 'status.health', value: 'green', mappedState: 'Ready' },
      { jsonPath: 'status.health', value: 'red', mappedState: 'Error' },
      { jsonPath: 'status.health', value: 'yellow', mappedState: 'Warning' },
    ];
    await suite.applyCatalog(template as { kind: string; metadata: { name: string } });
    await suite.kyma('w4', [{ name: module }]);
    await start();
    await suite.reconcileUntil(
      'w4',
      async () => (await entry('w4', module))?.state === 'Processing',
      'Processing while the CR reports nothing',
    );
    expect((await entry('w4', module))?.message).to.match(/customStateCheck: no mapped state yet/);

    const cr = {
      group,
      version: 'v1',
      plural: 'probes',
      namespace: 'kyma-system',
      name: `${module}-default`,
    };
    for (const [health, state] of [
      ['green', 'Ready'],
      ['red', 'Error'],
      ['yellow', 'Warning'],
    ] as const) {
      await custom(suite.planes.skr).patchNamespacedCustomObject(
        { ...cr, body: { status: { health } } },
        mergePatch,
      );
      await suite.reconcileUntil(
        'w4',
        async () => (await entry('w4', module))?.state === state,
        `${health} → ${state}`,
      );
    }
  });
});
