// Callbacks to a local system's listener as an SKR webhook sends them, and what they cost the SKR: the no-op pass
// test and the agent's memory bench both wake the agent this way and count the SKR API server's requests, once the
// KCP Kyma shows its modules installed.
import { readFile } from 'node:fs/promises';
import { request } from 'node:https';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { DEFAULTS, GROUP, KINDS, type Kyma } from '@skr-watcher/api';
import { apiserverMetrics, growth, labelOf } from '../apiserver-metrics.js';
import { eventually } from '../eventually.js';
import { parseMetrics, sumOf, type Samples } from '../prometheus-text.js';
import type { LocalSystem } from './index.js';

export const WRITE_VERBS = new Set(['POST', 'PUT', 'PATCH', 'APPLY', 'DELETE', 'DELETECOLLECTION']);
/** Further apart than the listener's pacing (one full pass per Kyma per second) and the 1 s re-check. */
export const CALLBACK_SPACING_MS = 2_500;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A callback as `skr`'s webhook sends it, in upstream's body: the SKR Kyma, without a fingerprint. */
export async function webhookCallback(system: LocalSystem, skr: string): Promise<void> {
  const files = system.skr(skr).certificates;
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
  if (status !== 200) throw new Error(`callback from ${skr} answered ${status}`);
}

/** Whether the KCP Kyma `name` is Ready with `modules` modules Ready. */
export async function kymaReadyWithModules(
  system: LocalSystem,
  name: string,
  modules: number,
): Promise<boolean> {
  const kyma = (await system.kcp.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
    group: GROUP,
    version: KINDS.kyma.version,
    plural: KINDS.kyma.plural,
    namespace: system.namespace,
    name,
  })) as Kyma;
  const ready = (kyma.status?.modules ?? []).filter((module) => module.state === 'Ready');
  return kyma.status?.state === 'Ready' && ready.length === modules;
}

export async function agentMetrics(system: LocalSystem): Promise<Samples> {
  const response = await fetch(`http://127.0.0.1:${system.agentMetricsPort}/metrics`);
  return parseMetrics(await response.text());
}

export const passesIn = (samples: Samples) => sumOf(samples, 'skr_agent_reconcile_total');

/** Waits until no pass ran for 3 s. */
export async function agentIdle(system: LocalSystem): Promise<void> {
  let last = -1;
  await eventually(
    'the agent idle (no pass for 3 s)',
    async () => {
      const now = passesIn(await agentMetrics(system));
      const idle = now === last;
      last = now;
      return idle ? true : undefined;
    },
    60_000,
    3_000,
  );
}

/**
 * Whether a series of the SKR API server counts a request of the agent: not the harness's list and watch of the
 * webhook's Secret (its files), not the API server's renewals of its identity Lease (kube-system, every 10 s); the
 * agent keeps no Lease in an SKR and lists no Secret there.
 */
export const agentSkrRequest = (key: string) => {
  const [verb, resource] = [labelOf(key, 'verb'), labelOf(key, 'resource')];
  return (
    resource !== '' &&
    verb !== 'WATCH' &&
    resource !== 'leases' &&
    !(resource === 'secrets' && verb === 'LIST')
  );
};

/** Callbacks until one wave of them costs the SKR no write: the passes after an install see what it wrote. */
export async function settleCallbacks(system: LocalSystem, skr: string): Promise<void> {
  const kubeConfig = system.skr(skr).kubeConfig();
  for (let round = 0; round < 10; round++) {
    await agentIdle(system);
    const before = await apiserverMetrics(kubeConfig);
    await webhookCallback(system, skr);
    await sleep(CALLBACK_SPACING_MS);
    await agentIdle(system);
    const writes = growth(
      before,
      await apiserverMetrics(kubeConfig),
      (key) => agentSkrRequest(key) && WRITE_VERBS.has(labelOf(key, 'verb')),
    );
    if (writes.size === 0) return;
  }
  throw new Error('every wave of callbacks still wrote to the SKR');
}

export interface NoopPasses {
  passes: number;
  /** SKR requests of the agent over the callbacks' passes, by `verb resource`. */
  served: Map<string, number>;
  requests: number;
  writes: number;
}

/** `callbacks` callbacks from `skr`, spaced; what the agent's passes cost the SKR API server meanwhile. */
export async function noopCallbacks(
  system: LocalSystem,
  skr: string,
  callbacks: number,
): Promise<NoopPasses> {
  const kubeConfig = system.skr(skr).kubeConfig();
  await agentIdle(system);
  const skrBefore = await apiserverMetrics(kubeConfig);
  const agentBefore = await agentMetrics(system);
  for (let i = 0; i < callbacks; i++) {
    await webhookCallback(system, skr);
    await sleep(CALLBACK_SPACING_MS);
  }
  await agentIdle(system);
  const grown = growth(skrBefore, await apiserverMetrics(kubeConfig), agentSkrRequest);
  const served = new Map<string, number>();
  let writes = 0;
  for (const [key, n] of grown) {
    const verb = labelOf(key, 'verb');
    const what = `${verb} ${labelOf(key, 'resource')}`;
    served.set(what, (served.get(what) ?? 0) + n);
    if (WRITE_VERBS.has(verb)) writes += n;
  }
  return {
    passes: passesIn(await agentMetrics(system)) - passesIn(agentBefore),
    served,
    requests: [...served.values()].reduce((sum, n) => sum + n, 0),
    writes,
  };
}
