// One bad SKR must cost its own Kyma, never the agent or the fleet: hostile SKR servers on real TLS sockets
// (huge answers, silence), hostile kubeconfig Secrets and a Module CR nested 9,000 levels, against a private KCP
// and SKR (the SKR side always uses kyma-system/default, so no other suite may share it).
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request as httpsRequest } from 'node:https';
import { Writable } from 'node:stream';
import { expect } from 'chai';
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS, LIMITS, type ModuleConfig } from '@skr-watcher/api';
import { startEnvironment, type Environment } from '@skr-watcher/testenv';
import { createLogger } from '@skr-watcher/telemetry';
import { eventually } from '../../test/support/eventually.js';
import { ManualClock } from '../../test/support/manual-clock.js';
import {
  hugeBody,
  malformedKubeconfig,
  neverAnswers,
  startHostileSkr,
  type HostileSkr,
} from '../../test/support/hostile-skr.js';
import { SAMPLE_MODULE_CR, seedKcp, seedKyma } from '../../test/support/kcp-seed.js';
import { createController, type Controller } from '../src/controller.js';
import { moduleConfigName } from '../src/reconcile/index.js';
import { createManager, type Manager } from '../src/manager/index.js';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

const sampleModulePath = () => {
  const { group, version, namespace, plural, name } = SAMPLE_MODULE_CR;
  return `/apis/${group}/${version}/namespaces/${namespace}/${plural}/${name}`;
};

/** A merge patch sent as the given text over the plane's own TLS credentials. */
async function rawMergePatch(kubeConfig: KubeConfig, path: string, body: string): Promise<void> {
  const cluster = kubeConfig.getCurrentCluster()!;
  const user = kubeConfig.getCurrentUser()!;
  const decode = (data: string | undefined) => Buffer.from(data ?? '', 'base64');
  const url = new URL(path, cluster.server);
  const status = await new Promise<number>((resolve, reject) => {
    const request = httpsRequest(
      url,
      {
        method: 'PATCH',
        ca: decode(cluster.caData),
        cert: decode(user.certData),
        key: decode(user.keyData),
        headers: { 'content-type': 'application/merge-patch+json' },
      },
      (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode ?? 0));
      },
    );
    request.on('error', reject);
    request.end(body);
  });
  if (status !== 200) throw new Error(`PATCH ${path}: HTTP ${status}`);
}

interface KymaStatus {
  state?: string;
  conditions?: { type: string; status: string; reason: string; message: string }[];
  modules?: { name: string; state: string; message?: string }[];
}

describe('hostile SKRs (real KCP, real SKR, hostile TLS servers)', function () {
  this.timeout(180_000);
  let env: Environment;
  let kcpCustom: CustomObjectsApi;
  let kcpCore: CoreV1Api;
  let seq = 0;
  let ns: string;
  let manager: Manager | undefined;
  let logLines: string[];
  const servers: HostileSkr[] = [];

  before(async function () {
    env = await startEnvironment({ planes: ['kcp', 'skr1'] });
    kcpCustom = env.plane('kcp').kubeConfig().makeApiClient(CustomObjectsApi);
    kcpCore = env.plane('kcp').kubeConfig().makeApiClient(CoreV1Api);
  });

  after(async function () {
    await env?.stop();
  });

  beforeEach(async function () {
    seq += 1;
    ns = `hostile-${process.pid}-${seq}`;
    await seedKcp(env, ns, ['skr1']);
    logLines = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logLines.push(chunk.toString('utf8'));
        done();
      },
    });
    manager = createManager({
      kcp: env.plane('kcp').kubeConfig(),
      namespace: ns,
      // Long bounds, so a hung request is still hanging while the test looks (nothing here waits them out).
      skrTimeoutMs: 60_000,
      reconcileDeadlineMs: 120_000,
      logger: createLogger('skr-agent', 'debug', sink),
    });
  });

  afterEach(async function () {
    await manager?.close();
    for (const server of servers.splice(0)) await server.close();
  });

  async function kymaStatus(name: string): Promise<KymaStatus> {
    const kyma = (await kcpCustom.getNamespacedCustomObject({
      group: GROUP,
      version: KINDS.kyma.version,
      plural: KINDS.kyma.plural,
      namespace: ns,
      name,
    })) as { status?: KymaStatus };
    return kyma.status ?? {};
  }

  /** spec.greeting of skr1's sample Module CR as its ModuleConfig in KCP holds it. */
  async function mirroredGreeting(): Promise<string | undefined> {
    const config = (await kcpCustom.getNamespacedCustomObject({
      group: GROUP,
      version: KINDS.moduleConfig.version,
      plural: KINDS.moduleConfig.plural,
      namespace: ns,
      name: moduleConfigName('skr1', 'sample'),
    })) as { spec: { resource: { spec?: { greeting?: string } } } };
    return config.spec.resource.spec?.greeting;
  }

  /** The status of skr1's sample ModuleConfig in KCP. */
  async function moduleConfigStatus(): Promise<ModuleConfig['status']> {
    const config = (await kcpCustom.getNamespacedCustomObject({
      group: GROUP,
      version: KINDS.moduleConfig.version,
      plural: KINDS.moduleConfig.plural,
      namespace: ns,
      name: moduleConfigName('skr1', 'sample'),
    })) as ModuleConfig;
    return config.status;
  }

  async function hostileKyma(name: string, kubeconfig: string): Promise<void> {
    await seedKyma(env.plane('kcp').kubeConfig(), ns, name, kubeconfig);
    // The reconciler finds kubeconfig Secrets in the watch cache.
    await eventually(`Secret of ${name} in the watch cache`, async () => {
      const list = await kcpCore.listNamespacedSecret({ namespace: ns, resourceVersion: '0' });
      return list.items.some((s) => s.metadata?.labels?.[LABELS.kymaName] === name) || undefined;
    });
  }

  async function started(handler: Parameters<typeof startHostileSkr>[0]): Promise<HostileSkr> {
    const server = await startHostileSkr(handler);
    servers.push(server);
    return server;
  }

  it('fails a Kyma whose SKR answers with 300 MB bodies, naming the limit; the agent and a healthy Kyma carry on', async function () {
    const body = hugeBody(300 * 1024 * 1024);
    const hostile = await started(body.handler);
    await hostileKyma('huge', hostile.kubeconfig);

    const failure = await manager!.reconciler.reconcile(`${ns}/huge`).catch((error: unknown) => error);
    expect(String(failure)).to.include(`exceeds the limit of ${LIMITS.skrResponseBytes} bytes`);
    const status = await kymaStatus('huge');
    expect(status.state).to.equal('Error');
    expect(status.conditions?.find((c) => c.type === 'SKRConnected')?.message).to.include(
      'exceeds the limit',
    );
    expect(body.sent()).to.be.below(LIMITS.skrResponseBytes + 16 * 1024 * 1024);

    await eventually('the healthy Kyma Ready', async () => {
      await manager!.reconciler.reconcile(`${ns}/skr1`);
      return (await kymaStatus('skr1')).state === 'Ready' || undefined;
    });
  });

  it('makes a Module CR nested 9,000 levels an Error on its module, in status, and finishes the reconcile', async function () {
    await eventually('the healthy Kyma Ready', async () => {
      await manager!.reconciler.reconcile(`${ns}/skr1`);
      return (await kymaStatus('skr1')).state === 'Ready' || undefined;
    });
    // Written as text: JSON.stringify itself overflows the stack at this depth (as a 40 KB request does).
    const deep = `${'{"n":'.repeat(9_000)}{"leaf":"x"}${'}'.repeat(9_000)}`;
    await rawMergePatch(env.plane('skr1').kubeConfig(), sampleModulePath(), `{"spec":{"deep":${deep}}}`);
    const skrCustom = env.plane('skr1').kubeConfig().makeApiClient(CustomObjectsApi);
    try {
      await manager!.reconciler.reconcile(`${ns}/skr1`);
      const status = await kymaStatus('skr1');
      expect(status.state).to.equal('Error');
      const sample = status.modules?.find((m) => m.name === 'sample');
      expect(sample?.state).to.equal('Error');
      expect(sample?.message).to.include(`nests deeper than ${LIMITS.objectDepth} levels; not mirrored`);
      // Its ModuleConfig keeps the last spec it mirrored and says so: Error, with the reason.
      const config = await moduleConfigStatus();
      expect(config?.state).to.equal('Error');
      expect(config?.conditions?.find((c) => c.type === 'Mirrored')).to.deep.include({
        status: 'False',
        reason: 'SpecTooDeep',
      });
      await skrCustom.patchNamespacedCustomObject(
        { ...SAMPLE_MODULE_CR, body: { spec: { deep: null } } },
        mergePatch,
      );
      await manager!.reconciler.reconcile(`${ns}/skr1`);
      const mirroredAgain = await moduleConfigStatus();
      expect(mirroredAgain?.state, 'mirrored again once the spec can be').to.equal('Ready');
      expect(mirroredAgain?.conditions ?? []).to.deep.equal([]);
    } finally {
      await skrCustom.patchNamespacedCustomObject(
        { ...SAMPLE_MODULE_CR, body: { spec: { deep: null } } },
        mergePatch,
      );
    }
  });

  it('refuses a kubeconfig Secret with an exec plugin: the Kyma is Error with the reason, and nothing runs', async function () {
    const dir = await mkdtemp(join(tmpdir(), 'skr-exec-'));
    const ran = join(dir, 'ran');
    try {
      const hostile = await started(neverAnswers);
      const kubeconfig = hostile.kubeconfig.replace(
        '{token: hostile-token}',
        `{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: ["-c", "touch ${ran}"], interactiveMode: Never}}`,
      );
      await hostileKyma('exec', kubeconfig);
      await manager!.reconciler.reconcile(`${ns}/exec`).catch(() => undefined);
      const condition = (await kymaStatus('exec')).conditions?.find((c) => c.type === 'SKRConnected');
      expect(condition).to.include({ status: 'False', reason: 'KubeconfigInvalid' });
      expect(condition?.message).to.include('users[0].user uses "exec", which is refused');
      expect(existsSync(ran), 'the exec plugin ran in the agent').to.equal(false);
      expect(hostile.requests()).to.equal(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('keeps every byte of a malformed kubeconfig Secret out of logs, Events and status', async function () {
    const marker = 'pw-MARKER-41d7e2';
    const malformed = malformedKubeconfig(marker);
    await hostileKyma('malformed', malformed);
    for (let attempt = 0; attempt < 3; attempt++)
      await manager!.reconciler.reconcile(`${ns}/malformed`).catch(() => undefined);
    const status = await kymaStatus('malformed');
    expect(status.conditions?.find((c) => c.type === 'SKRConnected')?.reason).to.equal('KubeconfigInvalid');
    const events = await kcpCore.listNamespacedEvent({ namespace: ns });
    expect(events.items.some((e) => e.involvedObject.name === 'malformed')).to.equal(true);
    expect(logLines.join('\n')).to.include('reconcile failed');
    for (const [where, text] of [
      ['logs', logLines.join('\n')],
      ['status', JSON.stringify(status)],
      ['Events', JSON.stringify(events.items)],
    ] as const) {
      expect(text, where).to.not.include(marker);
    }
  });

  describe('with the controller', function () {
    let controller: Controller | undefined;

    afterEach(async function () {
      // Closing the servers first ends the hung requests, so stop() need not wait them out.
      for (const server of servers.splice(0)) await server.close();
      await controller?.stop();
    });

    it('converges a healthy Kyma edit while 20 SKRs hang on every request', async function () {
      const hung = await started(neverAnswers);
      for (let i = 0; i < 20; i++) await hostileKyma(`hung-${i}`, hung.kubeconfig);
      controller = createController({
        kcp: env.plane('kcp').kubeConfig(),
        namespace: ns,
        reconciler: manager!.reconciler,
        workers: 4,
      });
      await controller.start();
      await eventually(
        'the healthy Kyma Ready',
        async () => (await kymaStatus('skr1')).state === 'Ready' || undefined,
        60_000,
      );
      await eventually('20 hung SKR requests', async () => hung.pending() >= 20 || undefined, 60_000);

      const greeting = `edited while 20 SKRs hang ${Date.now()}`;
      const skrCustom = env.plane('skr1').kubeConfig().makeApiClient(CustomObjectsApi);
      await skrCustom.patchNamespacedCustomObject(
        { ...SAMPLE_MODULE_CR, body: { spec: { greeting } } },
        mergePatch,
      );
      controller.enqueue(`${ns}/skr1`); // what the listener does on the webhook's callback
      await eventually(
        'the edit in the ModuleConfig',
        async () => (await mirroredGreeting()) === greeting || undefined,
      );
      // Converged while the hung SKRs were still hanging (their requests time out after 60 s).
      expect(hung.pending()).to.be.at.least(20);
    });

    it('runs a healthy Kyma edit before 18 queued Kymas added with hung SKRs, while their first runs still hold workers', async function () {
      // Time of the work queue stands still unless the test moves it: a hung run leaves its worker only when told.
      const clock = new ManualClock();
      const runs: string[] = [];
      controller = createController({
        kcp: env.plane('kcp').kubeConfig(),
        namespace: ns,
        reconciler: {
          reconcile: (key) => {
            runs.push(key.slice(ns.length + 1));
            return manager!.reconciler.reconcile(key);
          },
        },
        workers: 2,
        clock,
      });
      await controller.start();
      await eventually(
        'the healthy Kyma Ready',
        async () => (await kymaStatus('skr1')).state === 'Ready' || undefined,
        60_000,
      );
      await controller.queue.whenIdle();

      // 20 new Kymas whose SKR never answers: two take the workers and hang, 18 wait in the queue.
      const hung = await started(neverAnswers);
      for (let i = 0; i < 20; i++) await hostileKyma(`hung-${i}`, hung.kubeconfig);
      await eventually(
        '18 hung Kymas queued',
        async () => controller!.queue.depth === 18 || undefined,
        60_000,
      );
      await eventually('2 hung SKR requests', async () => hung.pending() >= 2 || undefined, 60_000);

      const greeting = `edited behind 18 new hung Kymas ${Date.now()}`;
      const skrCustom = env.plane('skr1').kubeConfig().makeApiClient(CustomObjectsApi);
      await skrCustom.patchNamespacedCustomObject(
        { ...SAMPLE_MODULE_CR, body: { spec: { greeting } } },
        mergePatch,
      );
      controller.enqueue(`${ns}/skr1`);
      // The two hung runs leave the workers for the slow lane, once; the healthy Kyma must be next, not hung-2.
      await clock.advance(1_000);
      await eventually(
        'the edit in the ModuleConfig',
        async () => (await mirroredGreeting()) === greeting || undefined,
      );
      const healthyRuns = runs.flatMap((key, index) => (key === 'skr1' ? [index] : []));
      const hungStartedBeforeEdit = runs
        .slice(0, healthyRuns.at(-1))
        .filter((key) => key.startsWith('hung-'));
      expect(hungStartedBeforeEdit, 'hung Kymas run before the healthy edit').to.have.length.at.most(4);
      expect(controller.queue.depth, 'hung Kymas still queued').to.be.at.least(14);
    });
  });
});
