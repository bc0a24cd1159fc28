// The skr-agent binary with a direct mTLS listener on private real planes (a KCP and SKRs seeded with the sample
// module), requeues an hour apart so that only callbacks explain a reconcile; for the listener's journey tests.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS, type ModuleConfig } from '@skr-watcher/api';
import { freePort, startEnvironment, type Environment } from '@skr-watcher/testenv';
import {
  listenerFlags,
  QUIET_REQUEUE_FLAGS,
  runAgent,
  type AgentChild,
} from '../../agent/test/support/agent-child.js';
import { createTestCa, issueTestLeaf, type TestCa } from '../../agent/test/support/listener-certs.js';
import { tlsAgent } from '../../agent/test/support/listener-client.js';
import { waitUntil } from './eventually.js';
import { seedKcp } from './kcp-seed.js';

export interface ListeningAgent {
  env: Environment;
  kcp: KubeConfig;
  /** Holds the listener's tls.crt, tls.key and ca.crt. */
  dir: string;
  ca: TestCa;
  agent: AgentChild;
  listenerPort: number;
  metricsPort: number;
  /** The sample module's ModuleConfig of an SKR's Kyma. */
  moduleConfigOf(skr: string): Promise<ModuleConfig | undefined>;
  /** skr_agent_reconcile_total summed over its results. */
  reconciles(): Promise<number>;
  /** A kept-alive mTLS client with a leaf of `issuer` (default: the listener's CA) for `commonName`. */
  identity(
    commonName: string,
    options?: { issuer?: TestCa; maxSockets?: number },
  ): ReturnType<typeof tlsAgent>;
  stop(): Promise<void>;
}

/** The sample module's ModuleConfig of the Kyma named `kyma` in a KCP namespace. */
export async function sampleModuleConfig(
  kcp: KubeConfig,
  namespace: string,
  kyma: string,
): Promise<ModuleConfig | undefined> {
  const list = (await kcp.makeApiClient(CustomObjectsApi).listNamespacedCustomObject({
    group: GROUP,
    version: KINDS.moduleConfig.version,
    plural: KINDS.moduleConfig.plural,
    namespace,
    labelSelector: `${LABELS.kymaName}=${kyma}`,
  })) as { items: ModuleConfig[] };
  return list.items.find((c) => c.spec.module === 'sample');
}

/** Starts the planes and the agent, and waits until every SKR's ModuleConfig is mirrored. */
export async function startListeningAgent(
  namespace: string,
  skrs: readonly string[],
): Promise<ListeningAgent> {
  const env = await startEnvironment({ planes: ['kcp', ...skrs] });
  let dir: string | undefined;
  let agent: AgentChild | undefined;
  const stop = async () => {
    if (agent && agent.child.exitCode === null) {
      agent.child.kill('SIGTERM');
      await agent.exited;
    }
    await env.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  };
  try {
    const kcp = env.plane('kcp').kubeConfig();
    await seedKcp(env, namespace, skrs);
    dir = await mkdtemp(join(tmpdir(), `${namespace}-`));
    const ca = createTestCa('kcp-test-ca');
    const listenerPort = await freePort();
    const metricsPort = await freePort();
    const started = runAgent(env.plane('kcp').kubeconfigPath, namespace, [
      ...(await listenerFlags(dir, ca, listenerPort)),
      '--metrics-address',
      `127.0.0.1:${metricsPort}`,
      ...QUIET_REQUEUE_FLAGS,
    ]);
    agent = started;
    await waitUntil(
      'the agent is ready',
      async () => (await fetch(`http://127.0.0.1:${metricsPort}/readyz`)).status === 200,
      90_000,
    ).catch((error: unknown) => {
      throw new Error(`agent output:\n${started.output().slice(-4000)}`, { cause: error });
    });
    const moduleConfigOf = (skr: string) => sampleModuleConfig(kcp, namespace, skr);
    await waitUntil(
      'every ModuleConfig is mirrored',
      async () => (await Promise.all(skrs.map(moduleConfigOf))).every(Boolean),
      90_000,
    );
    return {
      env,
      kcp,
      dir,
      ca,
      agent: started,
      listenerPort,
      metricsPort,
      moduleConfigOf,
      reconciles: async () => {
        const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
        return [...text.matchAll(/^skr_agent_reconcile_total\{[^}]*\} (\d+)$/gm)].reduce(
          (sum, [, value]) => sum + Number(value),
          0,
        );
      },
      identity: (commonName, options = {}) => {
        const leaf = issueTestLeaf(options.issuer ?? ca, { commonName, dnsNames: [`${commonName}.local`] });
        return tlsAgent(
          { caPem: ca.certPem, certPem: leaf.certPem, keyPem: leaf.keyPem },
          { maxSockets: options.maxSockets ?? 1 },
        );
      },
      stop,
    };
  } catch (error) {
    await stop().catch(() => {});
    throw error;
  }
}
