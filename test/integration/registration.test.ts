// Automatic webhook registration against real API servers: certificate, SKR Secret, webhook configuration.
import { expect } from 'chai';
import {
  CoreV1Api,
  CustomObjectsApi,
  AdmissionregistrationV1Api,
  AppsV1Api,
  RbacAuthorizationV1Api,
} from '@kubernetes/client-node';
import { ANNOTATIONS, GROUP, KINDS, LABELS, type Kyma, type Watcher } from '@skr-watcher/api';
import {
  createClusterClient,
  KcpPkiSecrets,
  kubeRequestMetrics,
  mergePatchCustomObject,
  type ClusterClient,
} from '@skr-watcher/kube';
import { createRegistry } from '@skr-watcher/telemetry';
import { createCa, describeCertificate, isSignedBy } from '@skr-watcher/pki';
import { startEnvironment, type Environment } from '@skr-watcher/testenv';
import { registerSkrWebhook, unregisterSkrWebhook } from '../../agent/src/registration/index.js';

const NS = 'kcp-system';
const DAY = 24 * 3600_000;

function kyma(urlMode: boolean): Kyma {
  return {
    apiVersion: `${GROUP}/${KINDS.kyma.version}`,
    kind: 'Kyma',
    metadata: {
      name: 'kyma-reg',
      namespace: NS,
      labels: { [LABELS.runtimeId]: 'runtime-reg' },
      annotations: {
        [ANNOTATIONS.skrDomain]: 'reg.example.com',
        ...(urlMode ? { [ANNOTATIONS.skrWebhookUrl]: 'https://127.0.0.1:9443' } : {}),
      },
    },
    spec: { channel: 'regular', modules: [{ name: 'sample' }] },
  };
}

function watcher(name: string, field: 'spec' | 'status'): Watcher {
  return {
    apiVersion: `${GROUP}/${KINDS.watcher.version}`,
    kind: 'Watcher',
    metadata: { name, namespace: NS },
    spec: {
      manager: 'lifecycle-manager',
      labelsToWatch: { [LABELS.watchedBy]: 'lifecycle-manager' },
      resourceToWatch: { group: GROUP, version: 'v1beta2', resource: 'kymas' },
      field,
    },
  };
}

describe('automatic webhook registration (real KCP and SKR)', function () {
  this.timeout(120_000);
  let env: Environment;
  let kcp: ClusterClient;
  let skr: ClusterClient;
  let caPem: string;
  const options = { image: 'example/skr-webhook:test', kcpAddress: 'kcp.example.com:8082' };

  before(async () => {
    env = await startEnvironment({ planes: ['kcp', 'skr'] });
    kcp = await createClusterClient(env.plane('kcp').kubeConfig());
    skr = await createClusterClient(env.plane('skr').kubeConfig());
    const core = env.plane('kcp').kubeConfig().makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: NS } } });
    await env
      .plane('skr')
      .kubeConfig()
      .makeApiClient(CoreV1Api)
      .createNamespace({ body: { metadata: { name: 'kyma-system' } } });
    const ca = createCa({ commonName: 'reg-test-ca', keyBits: 2048 });
    caPem = ca.certPem;
    const secrets = new KcpPkiSecrets(core, NS);
    await secrets.createCa(ca, {});
    await secrets.writeBundle(ca.certPem);
    const custom = env.plane('kcp').kubeConfig().makeApiClient(CustomObjectsApi);
    await custom.createNamespacedCustomObject({
      group: GROUP,
      version: KINDS.watcher.version,
      namespace: NS,
      plural: KINDS.watcher.plural,
      body: watcher('kyma-watcher', 'spec'),
    });
  });
  after(async () => {
    await kcp?.close();
    await skr?.close();
    await env?.stop();
  });

  const register = (k: Kyma, now = new Date()) =>
    registerSkrWebhook({
      kcp,
      namespace: NS,
      kyma: k,
      skr,
      moduleKinds: [{ apiVersion: `${GROUP}/v1alpha1`, kind: 'Sample' }],
      options,
      now,
    });

  it('issues the SKR certificate, copies it to the SKR and writes the webhook configuration (URL mode)', async () => {
    const result = await register(kyma(true));
    expect(result).to.include({ ok: true, reason: 'Installed', issued: 'no certificate yet' });

    const kcpCore = env.plane('kcp').kubeConfig().makeApiClient(CoreV1Api);
    const leafSecret = await kcpCore.readNamespacedSecret({ name: 'kyma-reg-webhook-tls', namespace: NS });
    const certPem = Buffer.from(leafSecret.data?.['tls.crt'] ?? '', 'base64').toString();
    const info = describeCertificate(certPem);
    expect(info.commonName).to.equal('runtime-reg');
    expect(info.dnsNames).to.include.members(['reg.example.com', 'skr-webhook.kyma-system.svc']);
    expect(info.ipAddresses).to.deep.equal(['127.0.0.1']);
    expect(isSignedBy(certPem, caPem)).to.equal(true);

    const skrSecret = await env
      .plane('skr')
      .kubeConfig()
      .makeApiClient(CoreV1Api)
      .readNamespacedSecret({ name: 'skr-webhook-tls', namespace: 'kyma-system' });
    expect(Buffer.from(skrSecret.data?.['tls.crt'] ?? '', 'base64').toString()).to.equal(certPem);
    expect(Buffer.from(skrSecret.data?.['ca.crt'] ?? '', 'base64').toString()).to.equal(caPem);

    const vwc = await env
      .plane('skr')
      .kubeConfig()
      .makeApiClient(AdmissionregistrationV1Api)
      .readValidatingWebhookConfiguration({ name: 'skr-webhook' });
    expect(vwc.webhooks?.map((w) => w.name)).to.deep.equal([
      'kyma-watcher.operator.kyma-project.io',
      'modules.skr-webhook.operator.kyma-project.io',
    ]);
    expect(vwc.webhooks?.[0]?.clientConfig.url).to.equal('https://127.0.0.1:9443/validate/lifecycle-manager');
    expect(vwc.webhooks?.[1]?.rules?.[0]?.resources).to.deep.equal(['samples']);

    // A second pass changes nothing and issues nothing.
    const again = await register(kyma(true));
    expect(again.issued).to.equal(undefined);
    const unchanged = await kcpCore.readNamespacedSecret({ name: 'kyma-reg-webhook-tls', namespace: NS });
    expect(unchanged.metadata?.resourceVersion).to.equal(leafSecret.metadata?.resourceVersion);
  });

  it('follows Watcher CRs: added, changed and deleted Watchers show in the webhook configuration', async () => {
    const custom = env.plane('kcp').kubeConfig().makeApiClient(CustomObjectsApi);
    const admission = env.plane('skr').kubeConfig().makeApiClient(AdmissionregistrationV1Api);
    const params = {
      group: GROUP,
      version: KINDS.watcher.version,
      namespace: NS,
      plural: KINDS.watcher.plural,
    };
    await custom.createNamespacedCustomObject({ ...params, body: watcher('status-watcher', 'status') });
    await register(kyma(true));
    let vwc = await admission.readValidatingWebhookConfiguration({ name: 'skr-webhook' });
    const statusHook = vwc.webhooks?.find((w) => w.name === 'status-watcher.operator.kyma-project.io');
    expect(statusHook?.rules?.[0]?.resources).to.deep.equal(['kymas/status']);

    await mergePatchCustomObject(
      kcp.custom,
      { ...params, name: 'status-watcher' },
      { spec: { labelsToWatch: { team: 'blue' } } },
    );
    await register(kyma(true));
    vwc = await admission.readValidatingWebhookConfiguration({ name: 'skr-webhook' });
    expect(
      vwc.webhooks?.find((w) => w.name === 'status-watcher.operator.kyma-project.io')?.objectSelector
        ?.matchLabels,
    ).to.deep.equal({
      [LABELS.watchedBy]: 'lifecycle-manager',
      team: 'blue',
    });

    await custom.deleteNamespacedCustomObject({ ...params, name: 'status-watcher' });
    await register(kyma(true));
    vwc = await admission.readValidatingWebhookConfiguration({ name: 'skr-webhook' });
    expect(vwc.webhooks?.map((w) => w.name)).to.not.include('status-watcher.operator.kyma-project.io');
  });

  it('reports Module CR kinds the SKR does not serve (unknown group-version or unknown kind) and keeps the known one', async () => {
    const result = await registerSkrWebhook({
      kcp,
      namespace: NS,
      kyma: kyma(true),
      skr,
      moduleKinds: [
        { apiVersion: `${GROUP}/v1alpha1`, kind: 'Sample' },
        { apiVersion: 'nothing.example.com/v1', kind: 'Gadget' },
        { apiVersion: `${GROUP}/v1alpha1`, kind: 'Gizmo' },
      ],
      options,
      now: new Date(),
    });
    expect(result).to.include({ ok: false, reason: 'ModuleResourceUnknown' });
    expect(result.message).to.include('Gadget.nothing.example.com/v1').and.include(`Gizmo.${GROUP}/v1alpha1`);
    const vwc = await env
      .plane('skr')
      .kubeConfig()
      .makeApiClient(AdmissionregistrationV1Api)
      .readValidatingWebhookConfiguration({ name: 'skr-webhook' });
    const modules = vwc.webhooks?.find((w) => w.name === 'modules.skr-webhook.operator.kyma-project.io');
    expect(modules?.rules?.[0]?.resources).to.deep.equal(['samples']);
    // Back to the known kind alone: installed again.
    expect(await register(kyma(true))).to.include({ ok: true, reason: 'Installed' });
  });

  it('renews the SKR certificate once 30 days or less are left', async () => {
    const renewed = await register(kyma(true), new Date(Date.now() + 31 * DAY));
    expect(renewed.issued).to.match(/days left/);
    const secrets = new KcpPkiSecrets(env.plane('kcp').kubeConfig().makeApiClient(CoreV1Api), NS);
    const leaf = await secrets.readLeaf('kyma-reg');
    expect(describeCertificate(leaf?.certPem ?? '').notBefore.getTime()).to.be.greaterThan(
      Date.now() + 30 * DAY,
    );
  });

  it('does not re-issue on every pass when the CA itself expires within the renewal window, and says why', async () => {
    const caNotAfter = describeCertificate(caPem).notAfter.getTime();
    const kcpCore = env.plane('kcp').kubeConfig().makeApiClient(CoreV1Api);
    const before = await kcpCore.readNamespacedSecret({ name: 'kyma-reg-webhook-tls', namespace: NS });
    const late = new Date(caNotAfter - 10 * DAY);
    const result = await register(kyma(true), late);
    expect(result).to.include({ ok: false, reason: 'CertificateAuthorityExpiring' });
    expect(result.message).to.match(/rotate the CA/);
    const after = await kcpCore.readNamespacedSecret({ name: 'kyma-reg-webhook-tls', namespace: NS });
    expect(after.metadata?.resourceVersion).to.equal(before.metadata?.resourceVersion);
  });

  it('installs the in-cluster webhook (ServiceAccount, ClusterRole, Deployment, Service, NetworkPolicy) and removes everything on unregister', async () => {
    // Back to a certificate valid now: a pass at the real time re-issues because the names changed (no IP SAN).
    const result = await register(kyma(false));
    expect(result.ok).to.equal(true);
    expect(result.issued).to.equal('names changed');
    const apps = env.plane('skr').kubeConfig().makeApiClient(AppsV1Api);
    const deployment = await apps.readNamespacedDeployment({ name: 'skr-webhook', namespace: 'kyma-system' });
    const env0 = deployment.spec?.template.spec?.containers[0]?.env ?? [];
    expect(env0.find((e) => e.name === 'KCP_ADDR')?.value).to.equal('kcp.example.com:8082');
    // It watches its own configuration with its ServiceAccount's token, to notice it deleted or re-pointed.
    expect(env0.find((e) => e.name === 'WATCH_CONFIGURATION')?.value).to.equal('skr-webhook');
    expect(deployment.spec?.template.spec?.automountServiceAccountToken).to.equal(true);
    expect(deployment.spec?.template.spec?.containers[0]?.image).to.equal('example/skr-webhook:test');
    const vwc = await env
      .plane('skr')
      .kubeConfig()
      .makeApiClient(AdmissionregistrationV1Api)
      .readValidatingWebhookConfiguration({ name: 'skr-webhook' });
    expect(vwc.webhooks?.[0]?.clientConfig.service).to.deep.include({
      name: 'skr-webhook',
      namespace: 'kyma-system',
    });

    await unregisterSkrWebhook({ kcp, namespace: NS, kymaName: 'kyma-reg', skr });
    await unregisterSkrWebhook({ kcp, namespace: NS, kymaName: 'kyma-reg', skr }); // idempotent
    const gone = async (read: () => Promise<unknown>) =>
      read().then(
        () => false,
        (e: { code?: number }) => e.code === 404,
      );
    const skrCore = env.plane('skr').kubeConfig().makeApiClient(CoreV1Api);
    expect(
      await gone(() => apps.readNamespacedDeployment({ name: 'skr-webhook', namespace: 'kyma-system' })),
    ).to.equal(true);
    expect(
      await gone(() => skrCore.readNamespacedSecret({ name: 'skr-webhook-tls', namespace: 'kyma-system' })),
    ).to.equal(true);
    expect(
      await gone(() => skrCore.readNamespacedService({ name: 'skr-webhook', namespace: 'kyma-system' })),
    ).to.equal(true);
    const rbac = env.plane('skr').kubeConfig().makeApiClient(RbacAuthorizationV1Api);
    expect(await gone(() => rbac.readClusterRole({ name: 'skr-webhook' }))).to.equal(true);
    expect(await gone(() => rbac.readClusterRoleBinding({ name: 'skr-webhook' }))).to.equal(true);
    expect(
      await gone(() =>
        env
          .plane('skr')
          .kubeConfig()
          .makeApiClient(AdmissionregistrationV1Api)
          .readValidatingWebhookConfiguration({ name: 'skr-webhook' }),
      ),
    ).to.equal(true);
    expect(
      await gone(() =>
        env
          .plane('kcp')
          .kubeConfig()
          .makeApiClient(CoreV1Api)
          .readNamespacedSecret({ name: 'kyma-reg-webhook-tls', namespace: NS }),
      ),
    ).to.equal(true);
  });

  it('a pass with nothing changed applies nothing in the SKR, and one after a user deleted or edited an object puts it back', async () => {
    // Its own client, whose requests are counted; a new client remembers no applies.
    const registry = createRegistry();
    const counted = await createClusterClient(env.plane('skr').kubeConfig(), {
      metrics: { kind: 'skr', counters: kubeRequestMetrics(registry) },
    });
    const requests = async (verb: string) => {
      const metric = registry.getSingleMetric('skr_agent_kube_requests_total');
      const values = (await metric?.get())?.values ?? [];
      return values.filter((v) => v.labels['verb'] === verb).reduce((sum, v) => sum + v.value, 0);
    };
    const pass = async () => {
      const result = await registerSkrWebhook({
        kcp,
        namespace: NS,
        kyma: kyma(false),
        skr: counted,
        moduleKinds: [{ apiVersion: `${GROUP}/v1alpha1`, kind: 'Sample' }],
        options,
        now: new Date(),
      });
      expect(result.ok, result.message).to.equal(true);
      return result;
    };
    try {
      expect((await pass()).restored, 'nothing put back on a first pass').to.deep.equal([]);
      // Secret, ServiceAccount, ClusterRole and binding, Deployment, Service, NetworkPolicy, webhook configuration.
      expect(await requests('apply')).to.equal(8);
      expect((await pass()).restored).to.deep.equal([]);
      expect(await requests('apply'), 'applies after a pass with nothing changed').to.equal(8);

      const skrCore = env.plane('skr').kubeConfig().makeApiClient(CoreV1Api);
      await skrCore.deleteNamespacedSecret({ name: 'skr-webhook-tls', namespace: 'kyma-system' });
      const admission = env.plane('skr').kubeConfig().makeApiClient(AdmissionregistrationV1Api);
      const vwc = await admission.readValidatingWebhookConfiguration({ name: 'skr-webhook' });
      await admission.replaceValidatingWebhookConfiguration({
        name: 'skr-webhook',
        body: { ...vwc, webhooks: (vwc.webhooks ?? []).map((hook) => ({ ...hook, timeoutSeconds: 30 })) },
      });
      expect((await pass()).restored, 'what the pass put back').to.deep.equal([
        'Secret skr-webhook-tls (deleted)',
        'ValidatingWebhookConfiguration skr-webhook (changed)',
      ]);
      expect(
        await requests('apply'),
        'the deleted Secret and the edited configuration applied again',
      ).to.equal(10);
      const secret = await skrCore.readNamespacedSecret({
        name: 'skr-webhook-tls',
        namespace: 'kyma-system',
      });
      expect(secret.data?.['tls.crt']).to.be.a('string');
      const restored = await admission.readValidatingWebhookConfiguration({ name: 'skr-webhook' });
      expect(restored.webhooks?.map((hook) => hook.timeoutSeconds)).to.deep.equal([5, 5]);
    } finally {
      await counted.close();
    }
  });

  it('a webhook configuration without hooks is not written again by a pass that applies it unchanged', async () => {
    const admission = env.plane('skr').kubeConfig().makeApiClient(AdmissionregistrationV1Api);
    const resourceVersions: (string | undefined)[] = [];
    for (let pass = 0; pass < 2; pass++) {
      // A new client each time, as after an agent restart: nothing remembered, so the pass applies.
      const fresh = await createClusterClient(env.plane('skr').kubeConfig());
      try {
        const result = await registerSkrWebhook({
          kcp,
          namespace: NS,
          kyma: kyma(true),
          skr: fresh,
          moduleKinds: [],
          options,
          now: new Date(),
          watchers: [],
        });
        expect(result.ok, result.message).to.equal(true);
      } finally {
        await fresh.close();
      }
      const vwc = await admission.readValidatingWebhookConfiguration({ name: 'skr-webhook' });
      expect(vwc.webhooks ?? []).to.deep.equal([]);
      resourceVersions.push(vwc.metadata?.resourceVersion);
    }
    expect(resourceVersions[1]).to.equal(resourceVersions[0]);
  });
});
