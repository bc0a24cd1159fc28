// The skr-agent binary with its mTLS listener on real planes: with requeues an hour apart, a Module CR
// edit in SKR 1 reaches its ModuleConfig only through a callback with SKR 1's identity, and SKR 2's
// ModuleConfig is untouched; identities without a Kyma are refused; a CA bundle changed on disk is
// picked up without a restart.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
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
import { sendCallback, tlsAgent, v2Body } from '../../agent/test/support/listener-client.js';
import { waitUntil } from '../support/eventually.js';
import { SAMPLE_MODULE_CR, seedKcp } from '../support/kcp-seed.js';

const SKRS = ['skr1', 'skr2'] as const;
const SAMPLE = SAMPLE_MODULE_CR;

describe('skr-agent: callbacks through the mTLS listener wake exactly their Kyma', function () {
  this.timeout(240_000);
  const namespace = 'agent-events';
  let env: Environment;
  let kcp: KubeConfig;
  let dir: string;
  let ca: TestCa;
  let agent: AgentChild | undefined;
  let listenerPort = 0;
  let metricsPort = 0;

  const moduleConfigOf = async (skr: string): Promise<ModuleConfig | undefined> => {
    const list = (await kcp.makeApiClient(CustomObjectsApi).listNamespacedCustomObject({
      group: GROUP,
      version: KINDS.moduleConfig.version,
      plural: KINDS.moduleConfig.plural,
      namespace,
      labelSelector: `${LABELS.kymaName}=${skr}`,
    })) as { items: ModuleConfig[] };
    return list.items.find((c) => c.spec.module === 'sample');
  };
  const identity = (commonName: string, issuer: TestCa) => {
    const leaf = issueTestLeaf(issuer, { commonName, dnsNames: [`${commonName}.local`] });
    return tlsAgent({ caPem: ca.certPem, certPem: leaf.certPem, keyPem: leaf.keyPem });
  };

  before(async () => {
    env = await startEnvironment({ planes: ['kcp', ...SKRS] });
    kcp = env.plane('kcp').kubeConfig();
    await seedKcp(env, namespace, SKRS);

    dir = await mkdtemp(join(tmpdir(), 'agent-events-'));
    ca = createTestCa('kcp-test-ca');
    listenerPort = await freePort();
    metricsPort = await freePort();
    agent = runAgent(env.plane('kcp').kubeconfigPath, namespace, [
      ...(await listenerFlags(dir, ca, listenerPort)),
      '--metrics-address',
      `127.0.0.1:${metricsPort}`,
      ...QUIET_REQUEUE_FLAGS,
    ]);
    await waitUntil(
      'the agent is ready',
      async () => (await fetch(`http://127.0.0.1:${metricsPort}/readyz`)).status === 200,
      60_000,
    ).catch((error: unknown) => {
      throw new Error(`agent output:\n${agent?.output().slice(-4000)}`, { cause: error });
    });
    await waitUntil(
      'both ModuleConfigs are mirrored',
      async () => !!(await moduleConfigOf('skr1')) && !!(await moduleConfigOf('skr2')),
      60_000,
    );
  });

  after(async () => {
    if (agent && agent.child.exitCode === null) {
      agent.child.kill('SIGTERM');
      await agent.exited;
    }
    await env?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("an edit in SKR 1 reaches only SKR 1's ModuleConfig, and only after SKR 1's callback", async () => {
    const reconciles = async () => {
      const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      return [...text.matchAll(/^skr_agent_reconcile_total\{[^}]*\} (\d+)$/gm)].reduce(
        (sum, [, value]) => sum + Number(value),
        0,
      );
    };
    await env
      .plane('skr1')
      .kubeConfig()
      .makeApiClient(CustomObjectsApi)
      .patchNamespacedCustomObject({
        ...SAMPLE,
        body: [{ op: 'replace', path: '/spec/greeting', value: 'edited in skr1' }],
      });
    // Marker, not a window: SKR 2's callback, sent after the edit, is reconciled; the agent has worked since the
    // edit and still has not mirrored it, because nothing told it about SKR 1.
    const reconcilesBefore = await reconciles();
    const marker = await sendCallback(listenerPort, identity('skr2', ca), { body: v2Body('sample') });
    expect(marker.status).to.equal(200);
    await waitUntil(
      'SKR 2 is reconciled after the edit',
      async () => (await reconciles()) > reconcilesBefore,
      30_000,
    );
    expect((await moduleConfigOf('skr1'))?.spec.resource.spec?.['greeting'], 'no trigger yet').to.not.equal(
      'edited in skr1',
    );
    const before2 = await moduleConfigOf('skr2');
    const answer = await sendCallback(listenerPort, identity('skr1', ca), { body: v2Body('sample') });
    expect(answer.status).to.equal(200);
    await waitUntil(
      "SKR 1's ModuleConfig follows the edit",
      async () => (await moduleConfigOf('skr1'))?.spec.resource.spec?.['greeting'] === 'edited in skr1',
      30_000,
    );
    const after2 = await moduleConfigOf('skr2');
    expect(after2?.metadata.resourceVersion, "SKR 2's ModuleConfig is untouched").to.equal(
      before2?.metadata.resourceVersion,
    );
  });

  it('refuses an identity without a Kyma (403) and a certificate from a foreign CA', async () => {
    const unknown = await sendCallback(listenerPort, identity('skr-unknown', ca), { body: v2Body('sample') });
    expect(unknown.status).to.equal(403);
    const foreign = createTestCa('foreign-ca');
    const refused = await sendCallback(listenerPort, identity('skr1', foreign), {
      body: v2Body('sample'),
    }).then(
      (a) => a.status,
      () => 'connection refused by TLS',
    );
    expect(refused).to.be.oneOf([401, 'connection refused by TLS']);
  });

  it('picks up a CA bundle changed on disk without a restart', async () => {
    const next = createTestCa('kcp-next-ca');
    const before = await sendCallback(listenerPort, identity('skr1', next), { body: v2Body('sample') }).then(
      (a) => a.status,
      () => 'refused',
    );
    expect(before).to.be.oneOf([401, 'refused']);
    await writeFile(join(dir, 'ca.crt'), `${ca.certPem}${next.certPem}`);
    await waitUntil(
      'a certificate from the added CA is accepted',
      async () =>
        (await sendCallback(listenerPort, identity('skr1', next), { body: v2Body('sample') }).then(
          (a) => a.status,
          () => 0,
        )) === 200,
      30_000,
    );
    expect(agent?.output()).to.include('listener TLS material reloaded');
  });
});
