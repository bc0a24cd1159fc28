// A KCP request that gets no answer in the middle of a pass is the KCP's failure, not the SKR's: on a real KCP whose
// admission webhook for Manifests hangs, the Manifest write times out at the agent's KCP bound; the pass backs off
// without marking the SKR unreachable, and converges once the KCP answers again.
import { expect } from 'chai';
import { AdmissionregistrationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { GROUP, KINDS } from '@skr-watcher/api';
import { neverAnswers, startHostileSkr, type HostileSkr } from '../../test/support/hostile-skr.js';
import { getOrUndefined } from './support/planes.js';
import { configMapYaml, moduleSuite, type Json } from './support/modules.js';

const KCP_TIMEOUT_MS = 1_500;

describe('KCP failures in the middle of a pass (real KCP with a hanging admission webhook, real SKR)', function () {
  this.timeout(180_000);
  const suite = moduleSuite();
  const { planes } = suite;
  let hanging: HostileSkr;
  const webhookName = () => `hang-manifests-${suite.state.ns}`;

  before(async function () {
    hanging = await startHostileSkr(neverAnswers);
  });
  after(async function () {
    await hanging?.close();
  });
  afterEach(async function () {
    const admission = planes.kcp.makeApiClient(AdmissionregistrationV1Api);
    await getOrUndefined(() => admission.deleteValidatingWebhookConfiguration({ name: webhookName() }));
  });

  /** Every Manifest write in the test's namespace waits on a webhook that never answers (up to 10 s). */
  async function hangManifestWrites(): Promise<void> {
    await planes.kcp.makeApiClient(AdmissionregistrationV1Api).createValidatingWebhookConfiguration({
      body: {
        metadata: { name: webhookName() },
        webhooks: [
          {
            name: 'hang.manifests.test.io',
            admissionReviewVersions: ['v1'],
            sideEffects: 'None',
            failurePolicy: 'Fail',
            timeoutSeconds: 10,
            clientConfig: {
              url: `${hanging.url}/validate`,
              caBundle: Buffer.from(hanging.caPem).toString('base64'),
            },
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': suite.state.ns } },
            rules: [
              {
                apiGroups: [GROUP],
                apiVersions: ['*'],
                resources: [KINDS.manifest.plural],
                operations: ['CREATE', 'UPDATE'],
              },
            ],
          },
        ],
      },
    });
  }

  const skrConnected = async (kyma: string): Promise<Json | undefined> =>
    ((await suite.kcpKyma(kyma)).status?.conditions ?? []).find((c: Json) => c.type === 'SKRConnected');

  async function eventReasons(kyma: string): Promise<string[]> {
    const events = await planes.kcp
      .makeApiClient(CoreV1Api)
      .listNamespacedEvent({ namespace: suite.state.ns, fieldSelector: `involvedObject.name=${kyma}` });
    return events.items.map((event) => event.reason ?? '');
  }

  it('backs off a pass whose Manifest write times out without marking the SKR unreachable, then converges', async function () {
    const module = `kcpfail${process.pid.toString(26).replace(/[0-9]/g, (d) => String.fromCharCode(107 + Number(d)))}`;
    await suite.publish({
      moduleName: module,
      version: '1.0.0',
      rawManifest: configMapYaml(`${module}-config`, 'kyma-system'),
    });
    await suite.kyma('kyma-kcpfail', [{ name: module }]);
    const manager = await suite.start({}, { kcpTimeoutMs: KCP_TIMEOUT_MS });
    await hangManifestWrites();

    let failure: unknown;
    try {
      await manager.reconciler.reconcile(`${suite.state.ns}/kyma-kcpfail`);
    } catch (error) {
      failure = error;
    }
    expect(failure, 'the pass backs off').to.be.instanceOf(Error);
    expect(String(failure)).to.match(/no answer within 1500 ms/);
    const condition = await skrConnected('kyma-kcpfail');
    expect(condition?.status, 'SKRConnected is not set False by a KCP failure').to.not.equal('False');
    expect(await eventReasons('kyma-kcpfail')).to.not.include('SKRUnreachable');

    const admission = planes.kcp.makeApiClient(AdmissionregistrationV1Api);
    await admission.deleteValidatingWebhookConfiguration({ name: webhookName() });
    await suite.reconcileUntil(
      'kyma-kcpfail',
      async () => (await suite.moduleStatus('kyma-kcpfail', module))?.state === 'Ready',
      'module Ready once the KCP answers',
    );
    expect((await skrConnected('kyma-kcpfail'))?.status).to.equal('True');
  });
});
