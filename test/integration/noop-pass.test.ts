// A pass with nothing to do costs the SKR nothing (decision 029), through the real path: callbacks to the KCP
// listener as an SKR webhook sends them (its client certificate; upstream's body, without a fingerprint, about the
// SKR Kyma) wake the agent process, whose passes find the inputs of the last full pass and leave the SKR alone.
// Counted by the SKR API server itself (apiserver_request_total), the passes by the agent's own counter. Drift is
// still put back at once: the SKR webhook watches what a module installed, and its callback makes the next pass a
// full one. Real planes, a real registry, the agent and webhook as processes; requeues are an hour long.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { mergePatchCustomObject } from '@skr-watcher/kube';
import { eventually } from '../support/eventually.js';
import { kymaReadyWithModules, noopCallbacks, settleCallbacks } from '../support/system/callbacks.js';
import { GREETER } from '../support/system/modules.js';
import { SKR_KYMA, startLocalSystem, type LocalSystem } from '../support/system/index.js';

const CALLBACKS = 10;

describe('a pass with nothing changed costs the SKR nothing (real planes, registry, agent and webhook processes)', function () {
  this.timeout(600_000);
  let parent: string;
  let system: LocalSystem;
  let skr: KubeConfig;
  let failed = false;

  before(async () => {
    parent = await mkdtemp(join(tmpdir(), 'skr-noop-'));
    system = await startLocalSystem({ dir: join(parent, 'system'), skrs: ['skr1'], modules: true });
    if (!system.modules?.agentInstalls) throw new Error('this skr-agent does not install modules');
    skr = system.skr('skr1').kubeConfig();
    // The greeter (a CRD, a ConfigMap and a default CR) beside the sample module: an installed set with no workload.
    const api = skr.makeApiClient(CustomObjectsApi);
    const current = (await api.getNamespacedCustomObject(SKR_KYMA)) as { spec?: { modules?: unknown[] } };
    await mergePatchCustomObject(api, SKR_KYMA, {
      spec: { modules: [...(current.spec?.modules ?? []), { name: GREETER.module }] },
    });
    await eventually(
      'the Kyma Ready with the sample and greeter modules Ready',
      async () => ((await kymaReadyWithModules(system, 'skr1', 2)) ? true : undefined),
      180_000,
      1_000,
    );
    // Callbacks until a pass writes nothing: the passes after the install see what the install wrote.
    await settleCallbacks(system, 'skr1');
  });

  afterEach(function () {
    if (this.currentTest?.state === 'failed') failed = true;
  });

  after(async () => {
    await system?.stop({ keepDir: failed });
    if (failed) console.log(`no-op pass test: logs kept in ${parent}`);
    else if (parent) await rm(parent, { recursive: true, force: true });
  });

  it(`${CALLBACKS} callbacks with nothing changed: no SKR write and at most 3 SKR requests per pass`, async () => {
    const { passes, served, requests, writes } = await noopCallbacks(system, 'skr1', CALLBACKS);
    const described = [...served].map(([what, n]) => `${what}: ${n}`).join(', ');
    console.log(
      `      ${CALLBACKS} callbacks, ${passes} passes; the SKR API server served ${requests} (${described})`,
    );
    // Each callback without a fingerprint is a pass now and a re-check a second later.
    expect(passes).to.be.at.least(CALLBACKS);
    expect(writes, 'SKR writes').to.equal(0);
    expect(requests).to.be.at.most(3 * passes);
  });

  it('drift on an installed object is still put back at once', async () => {
    const core = skr.makeApiClient(CoreV1Api);
    const installed = await core.readNamespacedConfigMap({
      name: GREETER.configMap,
      namespace: GREETER.namespace,
    });
    await core.deleteNamespacedConfigMap({ name: GREETER.configMap, namespace: GREETER.namespace });
    const startedAt = Date.now();
    await eventually(
      'the deleted ConfigMap re-created',
      async () => {
        const read = await core.readNamespacedConfigMap({
          name: GREETER.configMap,
          namespace: GREETER.namespace,
        });
        return read.metadata?.uid !== installed.metadata?.uid ? true : undefined;
      },
      10_000,
      50,
    );
    console.log(`      the deleted ConfigMap was back after ${Date.now() - startedAt} ms`);
  });
});
