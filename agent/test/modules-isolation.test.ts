// One module cannot take down the agent or another module's objects, on a real KCP, SKR and registry: a raw
// manifest that no parse within the bounds can read ends in its Manifest's Error while the agent, run as
// manifests/kcp runs it, lives on and the Kyma's other module stays Ready; a module naming another module's CRD is
// refused on it, says who holds it, and its removal leaves the CRD and a user's CR of it; a module shipping the SKR
// webhook's Secret is refused it.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { ApiextensionsV1Api, CoreV1Api } from '@kubernetes/client-node';
import { DEFAULTS } from '@skr-watcher/api';
import { freePort, startProcess, startRegistry } from '@skr-watcher/testenv';
import { benchAgentRunArgs } from '../../test/support/bench-fleet.js';
import { SKR_WEBHOOK_TLS_SECRET } from '../src/registration/skr-resources.js';
import { shippedAgentEnv, shippedAgentScript } from '../../test/support/shipped-agent.js';
import { custom, getOrUndefined } from './support/planes.js';
import { configMapYaml, crdYaml, docs, moduleSuite, type Json } from './support/modules.js';

/** One ConfigMap whose `data` is a flow mapping of `keys` keys: 4 MB of YAML, far more to compose. */
function flowMapping(keys: number): string {
  const entries = Array.from({ length: keys }, (_, index) => `k${index}: v`);
  return `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: flow, namespace: kyma-system}\ndata: {${entries.join(', ')}}\n`;
}

async function eventually<T>(
  what: string,
  read: () => Promise<T>,
  done: (value: T) => boolean,
  timeoutMs = 120_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  for (;;) {
    try {
      last = await read();
      if (done(last)) return last;
    } catch {
      // not there yet
    }
    if (Date.now() > deadline) throw new Error(`${what}: not reached; last seen ${JSON.stringify(last)}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

describe('module isolation', function () {
  this.timeout(600_000);
  const suite = moduleSuite();
  const { planes } = suite;
  /** Module names are lower-case letters (the ModuleTemplate's pattern). */
  const unique = (base: string) =>
    `${base}-${process.pid.toString(26).replace(/[0-9]/g, (d) => String.fromCharCode(107 + Number(d)))}${String.fromCharCode(97 + (suite.state.counter % 26))}`;
  const manifestOf = async (module: string): Promise<Json | undefined> =>
    (await suite.manifests()).find(
      (manifest) => manifest.metadata.labels?.['operator.kyma-project.io/module-name'] === module,
    );

  it('a raw manifest past the parse bounds ends in Manifest Error; the shipped agent lives on and the other module is Ready', async function () {
    const good = unique('good');
    const flow = unique('flow');
    await suite.publish({
      moduleName: good,
      version: '1.0.0',
      rawManifest: configMapYaml(`${good}-config`, 'kyma-system'),
    });
    await suite.publish({ moduleName: flow, version: '1.0.0', rawManifest: flowMapping(420_000) });
    await suite.kyma('k1', [{ name: good }, { name: flow }]);

    const dir = await mkdtemp(join(tmpdir(), 'modules-isolation-'));
    const log = join(dir, 'agent.log');
    const agent = startProcess(
      process.execPath,
      [
        shippedAgentScript(),
        ...benchAgentRunArgs({
          kubeconfig: planes.env.plane('kcp').kubeconfigPath,
          namespace: suite.state.ns,
          metricsAddress: `127.0.0.1:${await freePort()}`,
          workers: '4',
          resync: '10m',
        }),
        '--oci-registry-host',
        `http://${suite.state.registry.host}`,
      ],
      log,
      shippedAgentEnv(),
    );
    try {
      expect(shippedAgentEnv()['NODE_OPTIONS']).to.include('--max-old-space-size');
      const kyma = await eventually(
        'the good module Ready and the flow module Error in the Kyma',
        () => suite.kcpKyma('k1'),
        (value) => {
          const modules: Json[] = value.status?.modules ?? [];
          const state = (name: string) => modules.find((m) => m.name === name)?.state;
          return state(good) === 'Ready' && state(flow) === 'Error';
        },
        240_000,
      );
      expect(agent.isRunning(), `the agent exited; its log: ${await readFile(log, 'utf8')}`).to.equal(true);
      const manifest = await manifestOf(flow);
      expect(manifest?.status?.state).to.equal('Error');
      expect(manifest?.status?.lastOperation?.operation).to.match(
        /more than \d+ YAML tokens|parsing needs more memory than the bound of \d+ MiB|parsing took longer than the bound/,
      );
      expect(kyma.status.modules.find((m: Json) => m.name === flow).message).to.match(/YAML tokens|parsing/);
      const config = await getOrUndefined(() =>
        planes.skr
          .makeApiClient(CoreV1Api)
          .readNamespacedConfigMap({ namespace: 'kyma-system', name: `${good}-config` }),
      );
      expect(config, 'the good module installed').to.not.equal(undefined);
    } finally {
      await agent.stop(10_000);
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("refuses a second module the first module's CRD, naming the holder; removing it leaves the CRD and a user's CR", async function () {
    const first = unique('first');
    const second = unique('second');
    const group = `${first}.test.io`;
    await suite.publish({
      moduleName: first,
      version: '1.0.0',
      rawManifest: docs(crdYaml(group, 'Sprocket'), configMapYaml(`${first}-config`, 'kyma-system')),
    });
    await suite.kyma('k2', [{ name: first }]);
    await suite.start();
    await suite.reconcileUntil(
      'k2',
      async () => (await suite.moduleStatus('k2', first))?.state === 'Ready',
      'first Ready',
    );
    const crdName = `sprockets.${group}`;
    const extensions = planes.skr.makeApiClient(ApiextensionsV1Api);
    const crdBefore = await extensions.readCustomResourceDefinition({ name: crdName });
    const userCr = (await custom(planes.skr).createNamespacedCustomObject({
      group,
      version: 'v1',
      plural: 'sprockets',
      namespace: 'default',
      body: {
        apiVersion: `${group}/v1`,
        kind: 'Sprocket',
        metadata: { name: 'users', namespace: 'default' },
        spec: { teeth: 12 },
      },
    })) as Json;

    await suite.publish({
      moduleName: second,
      version: '1.0.0',
      rawManifest: docs(crdYaml(group, 'Sprocket'), configMapYaml(`${second}-config`, 'kyma-system')),
    });
    await suite.skrModules([{ name: first }, { name: second }]);
    await suite.reconcileUntil(
      'k2',
      async () => (await suite.moduleStatus('k2', second))?.state === 'Error',
      'second Error',
    );
    const firstManifest = await manifestOf(first);
    const secondManifest = await manifestOf(second);
    const holder = `Manifest ${suite.state.ns}/${firstManifest?.metadata.name}`;
    expect(secondManifest?.status?.lastOperation?.operation).to.include(`is held by ${holder}`);
    const ownership = (secondManifest?.status?.conditions ?? []).find((c: Json) => c.type === 'Ownership');
    expect(ownership).to.include({ status: 'False', reason: 'HeldByAnother' });
    expect(ownership.message).to.include(crdName).and.include(holder);
    expect((await suite.moduleStatus('k2', first))?.state).to.equal('Ready');
    // The rest of the second module is installed; the CRD stays the first module's.
    expect(
      await getOrUndefined(() =>
        planes.skr
          .makeApiClient(CoreV1Api)
          .readNamespacedConfigMap({ namespace: 'kyma-system', name: `${second}-config` }),
      ),
    ).to.not.equal(undefined);

    await suite.skrModules([{ name: first }]);
    await suite.reconcileUntil(
      'k2',
      async () => (await suite.manifests()).length === 1 && !(await suite.moduleStatus('k2', second)),
      'second removed',
    );
    const crdAfter = await extensions.readCustomResourceDefinition({ name: crdName });
    expect(crdAfter.metadata?.uid).to.equal(crdBefore.metadata?.uid);
    expect(crdAfter.metadata?.deletionTimestamp).to.equal(undefined);
    const still = (await custom(planes.skr).getNamespacedCustomObject({
      group,
      version: 'v1',
      plural: 'sprockets',
      namespace: 'default',
      name: 'users',
    })) as Json;
    expect(still.metadata.uid).to.equal(userCr.metadata.uid);
    expect((await suite.moduleStatus('k2', first))?.state).to.equal('Ready');
    await custom(planes.skr).deleteNamespacedCustomObject({
      group,
      version: 'v1',
      plural: 'sprockets',
      namespace: 'default',
      name: 'users',
    });
  });

  it("refuses a module the SKR webhook's Secret, and its removal leaves the Secret", async function () {
    const module = unique('tls');
    const core = planes.skr.makeApiClient(CoreV1Api);
    const namespace = DEFAULTS.skrNamespace;
    const read = () =>
      getOrUndefined(() => core.readNamespacedSecret({ namespace, name: SKR_WEBHOOK_TLS_SECRET }));
    // As the webhook's registration writes it.
    await core.createNamespace({ body: { metadata: { name: namespace } } }).catch(() => undefined);
    if (!(await read()))
      await core.createNamespacedSecret({
        namespace,
        body: {
          metadata: { name: SKR_WEBHOOK_TLS_SECRET, namespace },
          stringData: { 'tls.crt': "the agent's" },
        },
      });
    const before = await read();
    const secret = `apiVersion: v1\nkind: Secret\nmetadata: {name: ${SKR_WEBHOOK_TLS_SECRET}, namespace: ${namespace}}\nstringData: {tls.crt: stolen}\n`;
    await suite.publish({ moduleName: module, version: '1.0.0', rawManifest: secret });
    await suite.kyma('k3', [{ name: module }]);
    await suite.start();
    await suite.reconcileUntil(
      'k3',
      async () => (await suite.moduleStatus('k3', module))?.state === 'Error',
      'Error',
    );
    const manifest = await manifestOf(module);
    expect(manifest?.status?.lastOperation?.operation)
      .to.include("is the SKR webhook's Secret")
      .and.include('refused');
    expect((await read())?.data).to.deep.equal(before?.data);
    await suite.skrModules([]);
    await suite.reconcileUntil('k3', async () => (await suite.manifests()).length === 0, 'module removed');
    const after = await read();
    expect(after?.metadata?.uid).to.equal(before?.metadata?.uid);
    expect(after?.data).to.deep.equal(before?.data);
  });

  it('a registry stopped mid-upgrade fails that module, naming the registry; the SKR stays connected and the installed version runs', async function () {
    const shared = suite.state.registry;
    const own = await startRegistry();
    suite.state.registry = own;
    try {
      const module = unique('upg');
      await suite.publish({
        moduleName: module,
        version: '1.0.0',
        rawManifest: configMapYaml(`${module}-v1`, 'kyma-system'),
      });
      await suite.kyma('k4', [{ name: module }]);
      await suite.start();
      await suite.reconcileUntil(
        'k4',
        async () => (await suite.moduleStatus('k4', module))?.state === 'Ready',
        'Ready',
      );
      await suite.publish({
        moduleName: module,
        version: '2.0.0',
        rawManifest: configMapYaml(`${module}-v2`, 'kyma-system'),
      });
      await own.stop();
      await suite.reconcileUntil(
        'k4',
        async () => (await suite.moduleStatus('k4', module))?.state === 'Error',
        'module Error',
      );
      const kyma = await suite.kcpKyma('k4');
      const entry = kyma.status.modules.find((m: Json) => m.name === module);
      expect(entry.message).to.include(`registry ${own.host}`).and.include('unreachable');
      const connected = (kyma.status.conditions ?? []).find((c: Json) => c.type === 'SKRConnected');
      expect(connected?.status, JSON.stringify(kyma.status.conditions)).to.equal('True');
      expect(
        await getOrUndefined(() =>
          planes.skr
            .makeApiClient(CoreV1Api)
            .readNamespacedConfigMap({ namespace: 'kyma-system', name: `${module}-v1` }),
        ),
        'the installed version runs',
      ).to.not.equal(undefined);
    } finally {
      suite.state.registry = shared;
      await own.stop();
    }
  });

  it('3,000 module names no catalog knows: the Kyma status stays bounded and the known module installs', async function () {
    const known = unique('known');
    await suite.publish({
      moduleName: known,
      version: '1.0.0',
      rawManifest: configMapYaml(`${known}-config`, 'kyma-system'),
    });
    const madeUp = Array.from({ length: 3_000 }, (_, index) => ({ name: `made-up-${index}` }));
    await suite.kyma('k5', [{ name: known }, ...madeUp]);
    await suite.start();
    await suite.reconcileUntil(
      'k5',
      async () => (await suite.moduleStatus('k5', known))?.state === 'Ready',
      'Ready',
    );
    const kyma = await suite.kcpKyma('k5');
    const modules: Json[] = kyma.status.modules;
    expect(modules).to.have.length(11);
    expect(modules.filter((m) => m.name.startsWith('made-up-'))).to.have.length(10);
    expect(modules.some((m) => /and 2990 more modules no catalog knows/.test(m.message ?? ''))).to.equal(
      true,
    );
    expect(JSON.stringify(kyma.status).length).to.be.lessThan(20_000);
  });
});
