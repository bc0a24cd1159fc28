// Registration and callbacks end to end on real API servers, through the real path: SKR API server → skr-webhook → KCP listener →
// skr-agent. Requeues and resyncs are an hour long, so only a callback can explain a prompt update in KCP.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { AdmissionregistrationV1Api, CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS, type Kyma, type Watcher } from '@skr-watcher/api';
import { mergePatchCustomObject } from '@skr-watcher/kube';
import { SAMPLE_MODULE, startLocalSystem, type LocalSystem } from '../support/system/index.js';
import { eventually } from '../support/eventually.js';

const gone = (read: () => Promise<unknown>) =>
  read().then(
    () => false,
    (e: { code?: number }) => e.code === 404,
  );

describe('end to end: registration, callbacks and broken-watcher detection (real planes)', function () {
  this.timeout(600_000);
  let parent: string;
  let system: LocalSystem;

  before(async () => {
    parent = await mkdtemp(join(tmpdir(), 'skr-e2e-'));
    system = await startLocalSystem({
      dir: join(parent, 'system'),
      // Quiet SKRs are probed after 2 s; a probe must come back within 4 s.
      agentArgs: ['--watcher-probe-after', '2s', '--watcher-probe-timeout', '4s'],
    });
  });
  after(async () => {
    await system?.stop();
    if (parent) await rm(parent, { recursive: true, force: true });
  });

  const kymaOf = async (name: string) =>
    (await system.kcp.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
      group: GROUP,
      version: KINDS.kyma.version,
      namespace: system.namespace,
      plural: KINDS.kyma.plural,
      name,
    })) as Kyma;

  it('a Module CR edit in each SKR reaches its ModuleConfig through the webhook and the listener', async () => {
    for (const skr of system.skrs) {
      const greeting = `e2e ${skr.name} ${Date.now()}`;
      const custom = skr.kubeConfig().makeApiClient(CustomObjectsApi);
      const { module: _module, ...ref } = SAMPLE_MODULE;
      await mergePatchCustomObject(custom, ref, { spec: { greeting } });
      await eventually(`ModuleConfig of ${skr.name} mirrors the edit`, async () =>
        system.moduleConfigs.current(skr.name, SAMPLE_MODULE.module)?.spec['greeting'] === greeting
          ? true
          : undefined,
      );
      // The other SKR's mirror did not take this value.
      for (const other of system.skrs.filter((s) => s !== skr)) {
        expect(system.moduleConfigs.current(other.name, SAMPLE_MODULE.module)?.spec['greeting']).to.not.equal(
          greeting,
        );
      }
    }
  });

  it('adding, changing and deleting a Watcher CR updates the webhook configuration in every SKR', async () => {
    const custom = system.kcp.makeApiClient(CustomObjectsApi);
    const params = {
      group: GROUP,
      version: KINDS.watcher.version,
      namespace: system.namespace,
      plural: KINDS.watcher.plural,
    };
    const watcher: Watcher = {
      apiVersion: `${GROUP}/${KINDS.watcher.version}`,
      kind: 'Watcher',
      metadata: { name: 'e2e-status-watcher', namespace: system.namespace },
      spec: {
        manager: 'lifecycle-manager',
        labelsToWatch: { [LABELS.watchedBy]: 'lifecycle-manager' },
        resourceToWatch: { group: GROUP, version: 'v1beta2', resource: 'kymas' },
        field: 'status',
      },
    };
    const hookName = 'e2e-status-watcher.operator.kyma-project.io';
    const hooksIn = async (skr: (typeof system.skrs)[number]) =>
      (
        await skr
          .kubeConfig()
          .makeApiClient(AdmissionregistrationV1Api)
          .readValidatingWebhookConfiguration({ name: 'skr-webhook' })
      ).webhooks ?? [];

    await custom.createNamespacedCustomObject({ ...params, body: watcher });
    for (const skr of system.skrs) {
      await eventually(`${skr.name} gets the new webhook`, async () =>
        (await hooksIn(skr)).find((h) => h.name === hookName)?.rules?.[0]?.resources?.[0] === 'kymas/status'
          ? true
          : undefined,
      );
    }
    await mergePatchCustomObject(
      custom,
      { ...params, name: watcher.metadata.name },
      { spec: { field: 'spec' } },
    );
    for (const skr of system.skrs) {
      await eventually(`${skr.name} follows the changed Watcher`, async () =>
        (await hooksIn(skr)).find((h) => h.name === hookName)?.rules?.[0]?.resources?.[0] === 'kymas'
          ? true
          : undefined,
      );
    }
    await custom.deleteNamespacedCustomObject({ ...params, name: watcher.metadata.name });
    for (const skr of system.skrs) {
      await eventually(`${skr.name} drops the deleted Watcher's webhook`, async () =>
        (await hooksIn(skr)).some((h) => h.name === hookName) ? undefined : true,
      );
    }
  });

  it('a stopped webhook is detected (Kyma Warning with the reason) and the Kyma returns to Ready when it is back', async () => {
    const skr = system.skr('skr1');
    const custom = system.kcp.makeApiClient(CustomObjectsApi);
    const kymaRef = {
      group: GROUP,
      version: KINDS.kyma.version,
      namespace: system.namespace,
      plural: KINDS.kyma.plural,
      name: 'skr1',
    };
    await skr.webhook.stop();
    try {
      // A label change makes the agent look (Ready requeues are an hour long here); it probes only once the SKR
      // has been quiet for 2 s, so poke every 3 s until the probe is out and unanswered.
      let poked = 0;
      const broken = await eventually(
        'skr1 goes Warning with the SKRWebhook reason',
        async () => {
          if (Date.now() - poked > 3_000) {
            poked = Date.now();
            await mergePatchCustomObject(custom, kymaRef, {
              metadata: { labels: { 'e2e/poke': String(poked) } },
            });
          }
          const kyma = await kymaOf('skr1');
          const condition = kyma.status?.conditions?.find((c) => c.type === 'SKRWebhook');
          return kyma.status?.state === 'Warning' && condition?.status === 'False' ? condition : undefined;
        },
        45_000,
      );
      expect(broken.reason).to.equal('NoEventFromWebhook');
      expect(broken.message).to.match(/no event within 4 s of a probe/);
      // skr2 is unaffected.
      expect((await kymaOf('skr2')).status?.state).to.equal('Ready');
    } finally {
      await skr.restartWebhook();
    }
    await eventually(
      'skr1 back to Ready',
      async () => {
        const kyma = await kymaOf('skr1');
        const condition = kyma.status?.conditions?.find((c) => c.type === 'SKRWebhook');
        return kyma.status?.state === 'Ready' && condition?.status === 'True' ? true : undefined;
      },
      45_000,
    );
  });

  it('deleting a Kyma removes everything the agent installed in its SKR and its certificate in KCP', async () => {
    const skr = system.skr('skr2');
    await system.kcp.makeApiClient(CustomObjectsApi).deleteNamespacedCustomObject({
      group: GROUP,
      version: KINDS.kyma.version,
      namespace: system.namespace,
      plural: KINDS.kyma.plural,
      name: 'skr2',
    });
    await eventually('the KCP Kyma skr2 is gone', async () =>
      (await gone(() => kymaOf('skr2'))) ? true : undefined,
    );
    const skrCore = skr.kubeConfig().makeApiClient(CoreV1Api);
    expect(
      await gone(() =>
        skr
          .kubeConfig()
          .makeApiClient(AdmissionregistrationV1Api)
          .readValidatingWebhookConfiguration({ name: 'skr-webhook' }),
      ),
    ).to.equal(true);
    expect(
      await gone(() => skrCore.readNamespacedSecret({ name: 'skr-webhook-tls', namespace: 'kyma-system' })),
    ).to.equal(true);
    const { module: _module, ...sampleRef } = SAMPLE_MODULE;
    expect(
      await gone(() => skr.kubeConfig().makeApiClient(CustomObjectsApi).getNamespacedCustomObject(sampleRef)),
    ).to.equal(true);
    expect(
      await gone(() =>
        system.kcp
          .makeApiClient(CoreV1Api)
          .readNamespacedSecret({ name: 'skr2-webhook-tls', namespace: system.namespace }),
      ),
    ).to.equal(true);
    // skr1 keeps its webhook.
    const kept = await system
      .skr('skr1')
      .kubeConfig()
      .makeApiClient(AdmissionregistrationV1Api)
      .readValidatingWebhookConfiguration({ name: 'skr-webhook' });
    expect(kept.webhooks?.length ?? 0).to.be.greaterThan(0);
  });
});
