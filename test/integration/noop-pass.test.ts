// A pass with nothing to do costs the SKR nothing (decision 029), through the real path: callbacks to the KCP
// listener as an SKR webhook sends them (its client certificate; upstream's body, without a fingerprint, about the
// SKR Kyma) wake the agent process, whose passes find the inputs of the last full pass and leave the SKR alone.
// Counted by the SKR API server itself (apiserver_request_total), the passes by the agent's own counter. Drift is
// still put back at once: the SKR webhook watches what a module installed, and its callback makes the next pass a
// full one. Real planes, a real registry, the agent and webhook as processes; requeues are an hour long.
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { DEFAULTS, GROUP, KINDS, type Kyma } from '@skr-watcher/api';
import { mergePatchCustomObject } from '@skr-watcher/kube';
import { apiserverMetrics, growth, labelOf } from '../support/apiserver-metrics.js';
import { eventually } from '../support/eventually.js';
import { parseMetrics, sumOf, type Samples } from '../support/prometheus-text.js';
import { GREETER } from '../support/system/modules.js';
import { SKR_KYMA, startLocalSystem, type LocalSystem } from '../support/system/index.js';

const CALLBACKS = 10;
/** Further apart than the listener's pacing (one full pass per Kyma per second) and the 1 s re-check. */
const CALLBACK_SPACING_MS = 2_500;
const WRITE_VERBS = new Set(['POST', 'PUT', 'PATCH', 'APPLY', 'DELETE', 'DELETECOLLECTION']);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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
      async () => {
        const kyma = (await system.kcp.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
          group: GROUP,
          version: KINDS.kyma.version,
          plural: KINDS.kyma.plural,
          namespace: system.namespace,
          name: 'skr1',
        })) as Kyma;
        const ready = (kyma.status?.modules ?? []).filter((module) => module.state === 'Ready');
        return kyma.status?.state === 'Ready' && ready.length === 2 ? true : undefined;
      },
      180_000,
      1_000,
    );
    // Callbacks until a pass writes nothing: the passes after the install see what the install wrote.
    await settle();
  });

  afterEach(function () {
    if (this.currentTest?.state === 'failed') failed = true;
  });

  after(async () => {
    await system?.stop({ keepDir: failed });
    if (failed) console.log(`no-op pass test: logs kept in ${parent}`);
    else if (parent) await rm(parent, { recursive: true, force: true });
  });

  /** A callback as skr1's webhook sends it, in upstream's body: the SKR Kyma, without a fingerprint. */
  async function callback(): Promise<void> {
    const files = system.skr('skr1').certificates;
    const [cert, key, ca] = await Promise.all(
      ['tls.crt', 'tls.key', 'ca.crt'].map((k) => readFile(files.path(k))),
    );
    const body = JSON.stringify({
      watched: { Namespace: DEFAULTS.skrNamespace, Name: DEFAULTS.skrKymaName },
      watchedGvk: { group: GROUP, version: KINDS.kyma.version, kind: KINDS.kyma.kind },
    });
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: system.listenerPort,
          method: 'POST',
          path: `/v2/${DEFAULTS.manager}/event`,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
          cert,
          key,
          ca,
          agent: false,
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
    if (status !== 200) throw new Error(`callback answered ${status}`);
  }

  async function agentMetrics(): Promise<Samples> {
    const response = await fetch(`http://127.0.0.1:${system.agentMetricsPort}/metrics`);
    return parseMetrics(await response.text());
  }

  const passesIn = (samples: Samples) => sumOf(samples, 'skr_agent_reconcile_total');

  /** Waits until no pass ran for 3 s. */
  async function agentIdle(): Promise<void> {
    let last = -1;
    await eventually(
      'the agent idle (no pass for 3 s)',
      async () => {
        const now = passesIn(await agentMetrics());
        const idle = now === last;
        last = now;
        return idle ? true : undefined;
      },
      60_000,
      3_000,
    );
  }

  /**
   * Requests the SKR API server served, but the harness's list and watch of the webhook's Secret (its files) and the
   * API server's renewals of its identity Lease (kube-system, every 10 s): the agent keeps no Lease in an SKR and lists
   * no Secret there.
   */
  const skrRequests = (key: string) => {
    const [verb, resource] = [labelOf(key, 'verb'), labelOf(key, 'resource')];
    return (
      resource !== '' &&
      verb !== 'WATCH' &&
      resource !== 'leases' &&
      !(resource === 'secrets' && verb === 'LIST')
    );
  };

  /** Callbacks until one wave of them costs the SKR no write. */
  async function settle(): Promise<void> {
    for (let round = 0; round < 10; round++) {
      await agentIdle();
      const before = await apiserverMetrics(skr);
      await callback();
      await sleep(CALLBACK_SPACING_MS);
      await agentIdle();
      const writes = growth(
        before,
        await apiserverMetrics(skr),
        (key) => skrRequests(key) && WRITE_VERBS.has(labelOf(key, 'verb')),
      );
      if (writes.size === 0) return;
    }
    throw new Error('every wave of callbacks still wrote to the SKR');
  }

  it(`${CALLBACKS} callbacks with nothing changed: no SKR write and at most 3 SKR requests per pass`, async () => {
    await agentIdle();
    const skrBefore = await apiserverMetrics(skr);
    const agentBefore = await agentMetrics();
    for (let i = 0; i < CALLBACKS; i++) {
      await callback();
      await sleep(CALLBACK_SPACING_MS);
    }
    await agentIdle();
    const skrAfter = await apiserverMetrics(skr);
    const passes = passesIn(await agentMetrics()) - passesIn(agentBefore);
    const served = growth(skrBefore, skrAfter, skrRequests);
    const requests = [...served.values()].reduce((sum, n) => sum + n, 0);
    const writes = [...served].filter(([key]) => WRITE_VERBS.has(labelOf(key, 'verb')));
    const described = [...served]
      .map(([key, n]) => `${labelOf(key, 'verb')} ${labelOf(key, 'resource')}: ${n}`)
      .join(', ');
    console.log(
      `      ${CALLBACKS} callbacks, ${passes} passes; the SKR API server served ${requests} (${described})`,
    );
    // Each callback without a fingerprint is a pass now and a re-check a second later.
    expect(passes).to.be.at.least(CALLBACKS);
    expect(writes, 'SKR writes').to.deep.equal([]);
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
