// The skr-agent binary as a process against private real planes (KCP + two SKRs): killing it with
// SIGKILL in the middle of a burst of Module CR edits and starting it again ends with every ModuleConfig
// equal to its Module CR; SIGTERM stops it cleanly and releases its Lease.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { CoordinationV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS, type ModuleConfig } from '@skr-watcher/api';
import { startEnvironment, type Environment } from '@skr-watcher/testenv';
import { waitUntil as waitWithin } from '../../test/support/eventually.js';
import { SAMPLE_MODULE_CR, seedKcp } from '../../test/support/kcp-seed.js';
import { sampleModuleConfig } from '../../test/support/listening-agent.js';
import { runAgent, type AgentChild } from './support/agent-child.js';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
const SKRS = ['skr1', 'skr2'] as const;
const SAMPLE = SAMPLE_MODULE_CR;

const waitUntil = (what: string, check: () => Promise<boolean>, timeoutMs: number) =>
  waitWithin(what, check, timeoutMs, 250);

describe('skr-agent process on real planes', function () {
  this.timeout(300_000);
  let env: Environment;
  let kcp: KubeConfig;
  const namespace = 'agent-process';
  const agents: ChildProcess[] = [];

  function startAgent(extra: string[] = []): AgentChild {
    const agent = runAgent(
      env.plane('kcp').kubeconfigPath,
      namespace,
      [
        '--no-listener',
        // No webhook in these SKRs: the short Ready requeue is what notices Module CR edits.
        '--requeue-ready',
        '500ms',
        '--requeue-processing',
        '500ms',
        '--requeue-warning',
        '500ms',
        '--workers',
        '4',
        ...extra,
      ],
      // The whole output: tests look for markers in it.
      Infinity,
    );
    agents.push(agent.child);
    return agent;
  }

  async function moduleConfigsMatchModuleCrs(): Promise<{ ok: boolean; detail: string }> {
    const details: string[] = [];
    let ok = true;
    for (const skr of SKRS) {
      const sample = (await env
        .plane(skr)
        .kubeConfig()
        .makeApiClient(CustomObjectsApi)
        .getNamespacedCustomObject(SAMPLE)) as { metadata: { resourceVersion: string }; spec: unknown };
      const config = await sampleModuleConfig(kcp, namespace, skr);
      const same =
        !!config &&
        JSON.stringify(config.spec.resource.spec) === JSON.stringify(sample.spec) &&
        config.status?.sourceResourceVersion === sample.metadata.resourceVersion;
      ok &&= same;
      details.push(
        `${skr}: Module CR ${JSON.stringify(sample.spec)} rv ${sample.metadata.resourceVersion}; ModuleConfig ${
          config
            ? `${JSON.stringify(config.spec.resource.spec)} rv ${config.status?.sourceResourceVersion}`
            : 'absent'
        }`,
      );
    }
    return { ok, detail: details.join('\n') };
  }

  before(async () => {
    env = await startEnvironment({ planes: ['kcp', ...SKRS] });
    kcp = env.plane('kcp').kubeConfig();
    await seedKcp(env, namespace, SKRS);
  });

  afterEach(() => {
    for (const child of agents.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
  });

  after(async () => {
    await env?.stop();
  });

  it('ends with every ModuleConfig equal to its Module CR after a SIGKILL in the middle of an edit burst', async () => {
    let agent = startAgent();
    await waitUntil(
      'the first agent mirrors both Module CRs',
      async () => (await moduleConfigsMatchModuleCrs()).ok,
      90_000,
    ).catch(async (error: unknown) => {
      throw new Error(
        `${(await moduleConfigsMatchModuleCrs().catch(() => ({ detail: '' }))).detail}\nagent output:\n${agent.output().slice(-4000)}`,
        { cause: error },
      );
    });

    const skrApis = SKRS.map((skr) => env.plane(skr).kubeConfig().makeApiClient(CustomObjectsApi));
    const edit = async (i: number) => {
      await Promise.all(
        skrApis.map((api) =>
          api.patchNamespacedCustomObject({
            ...SAMPLE,
            body: [
              { op: 'replace', path: '/spec/replicas', value: i % 100 },
              { op: 'replace', path: '/spec/greeting', value: `edit ${i}` },
            ],
          }),
        ),
      );
    };
    for (let i = 1; i <= 30; i++) {
      await edit(i);
      if (i === 15) {
        agent.child.kill('SIGKILL');
        expect(await agent.exited).to.equal(null);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    agent = startAgent();
    await waitUntil(
      'the restarted agent converges',
      async () => (await moduleConfigsMatchModuleCrs()).ok,
      90_000,
    ).catch(async (error: unknown) => {
      throw new Error(
        `${(await moduleConfigsMatchModuleCrs().catch(() => ({ detail: '' }))).detail}\nagent output:\n${agent.output().slice(-4000)}`,
        {
          cause: error,
        },
      );
    });
    const final = await moduleConfigsMatchModuleCrs();
    expect(final.detail).to.include('"greeting":"edit 30"');
    agent.child.kill('SIGTERM');
    expect(await agent.exited, 'SIGTERM is a clean exit').to.equal(0);
  });

  it('keeps watching after the KCP API server restarts: a ModuleConfig deleted by hand comes back', async () => {
    // Requeues an hour apart: only the ModuleConfig watch can bring the mirror back quickly.
    const agent = startAgent([
      '--requeue-ready',
      '1h',
      '--requeue-processing',
      '1h',
      '--requeue-warning',
      '1h',
    ]);
    await waitUntil(
      'the agent mirrors both Module CRs',
      async () => (await moduleConfigsMatchModuleCrs()).ok,
      90_000,
    );
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await env.plane('kcp').restart();
    const api = kcp.makeApiClient(CustomObjectsApi);
    const ref = {
      group: GROUP,
      version: KINDS.moduleConfig.version,
      plural: KINDS.moduleConfig.plural,
      namespace,
    };
    let name = '';
    // Right after a restart the API server answers 429 while its storage initializes.
    await waitUntil(
      'the restarted API server lists ModuleConfigs',
      async () => {
        const list = (await api.listNamespacedCustomObject({
          ...ref,
          labelSelector: `${LABELS.kymaName}=skr1`,
        })) as {
          items: ModuleConfig[];
        };
        name = list.items[0]?.metadata.name ?? '';
        return name !== '';
      },
      30_000,
    );
    await api.deleteNamespacedCustomObject({ ...ref, name });
    await waitUntil(
      'the deleted ModuleConfig is back',
      async () => (await moduleConfigsMatchModuleCrs()).ok,
      60_000,
    ).catch((error: unknown) => {
      throw new Error(`agent output:\n${agent.output().slice(-4000)}`, { cause: error });
    });
    agent.child.kill('SIGTERM');
    expect(await agent.exited).to.equal(0);
  });

  /** Runs skr-agent to completion; returns its exit code and output. */
  async function runCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=source', MAIN, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    return { code, stdout, stderr };
  }

  it('reconcile --once exits 0 for a Kyma that ends Ready and 1 for one that cannot (no kubeconfig Secret)', async () => {
    const kubeconfig = env.plane('kcp').kubeconfigPath;
    const ready = await runCli([
      'reconcile',
      '--once',
      '--kyma',
      'skr1',
      '--kubeconfig',
      kubeconfig,
      '--namespace',
      namespace,
    ]);
    expect(ready.code, ready.stderr).to.equal(0);
    expect(JSON.parse(ready.stdout.trim().split('\n').pop() ?? '{}')).to.include({
      kyma: `${namespace}/skr1`,
      state: 'Ready',
    });

    await kcp.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      group: GROUP,
      version: KINDS.kyma.version,
      plural: KINDS.kyma.plural,
      namespace,
      body: {
        apiVersion: `${GROUP}/${KINDS.kyma.version}`,
        kind: 'Kyma',
        metadata: { name: 'orphan', namespace },
        spec: { channel: 'regular', modules: [] },
      },
    });
    const orphan = await runCli([
      'reconcile',
      '--once',
      '--kyma',
      'orphan',
      '--kubeconfig',
      kubeconfig,
      '--namespace',
      namespace,
    ]);
    expect(orphan.code).to.equal(1);
    expect(JSON.parse(orphan.stdout.trim().split('\n').pop() ?? '{}').state).to.not.equal('Ready');
    await kcp.makeApiClient(CustomObjectsApi).deleteNamespacedCustomObject({
      group: GROUP,
      version: KINDS.kyma.version,
      plural: KINDS.kyma.plural,
      namespace,
      name: 'orphan',
    });
  });

  it('answers --help for every command and refuses bad flags with exit code 2 and a reason', async () => {
    for (const args of [['--help'], ['run', '--help'], ['reconcile', '--help']]) {
      const help = await runCli(args);
      expect(help.code, args.join(' ')).to.equal(0);
      expect(help.stdout).to.include('Usage: skr-agent');
    }
    const noTls = await runCli(['run', '--kubeconfig', env.plane('kcp').kubeconfigPath]);
    expect(noTls.code).to.equal(2);
    expect(noTls.stderr).to.include('--tls-cert');
    const badDuration = await runCli(['run', '--no-listener', '--requeue-ready', 'soon']);
    expect(badDuration.code).to.equal(2);
    expect(badDuration.stderr).to.include('--requeue-ready');
  });

  it('with --leader-elect, SIGTERM releases the Lease so that a standby leads at once', async () => {
    const leaseArgs = ['--leader-elect', '--lease-name', 'agent-process-test'];
    const first = startAgent([...leaseArgs, '--leader-identity', 'first']);
    const leases = kcp.makeApiClient(CoordinationV1Api);
    const holder = async () =>
      (await leases.readNamespacedLease({ name: 'agent-process-test', namespace })).spec?.holderIdentity ??
      '';
    await waitUntil('the first agent leads', async () => (await holder()) === 'first', 60_000);
    const second = startAgent([...leaseArgs, '--leader-identity', 'second']);
    // Marker, not a window: the standby has read the Lease held by the first (it logs whom it waits for).
    await waitUntil(
      'the standby observes the first as leader',
      async () => second.output().includes('"leader":"first"'),
      60_000,
    );
    expect(await holder(), 'the standby waits while the leader renews').to.equal('first');
    expect(second.output(), 'the standby does not lead').not.to.include('became leader');
    first.child.kill('SIGTERM');
    expect(await first.exited).to.equal(0);
    // Released on the way out: the Lease no longer names the first (empty, or already the standby's); without
    // the release it would name the first until its 15 s lease expired.
    expect(await holder(), 'the Lease once the first has exited').to.be.oneOf(['', 'second']);
    await waitUntil('the standby leads', async () => (await holder()) === 'second', 30_000);
    await waitUntil(
      'the standby logs that it leads',
      async () => second.output().includes('became leader'),
      10_000,
    );
    second.child.kill('SIGTERM');
    expect(await second.exited).to.equal(0);
  });
});
