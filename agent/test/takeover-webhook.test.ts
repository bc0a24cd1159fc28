// Replacing lifecycle-manager's SKR webhook and its KCP certificate with the agent's (decision 028), on a real KCP
// and a real SKR: the SKR holds runtime-watcher's chart as lifecycle-manager installs it (its field manager and
// labels), the KCP its cert-manager Certificate and Secret; the takeover's webhook step runs around the agent's own
// registration (agent/src/registration).
import { expect } from 'chai';
import { parse } from 'yaml';
import { AppsV1Api, CoreV1Api, type KubernetesObject } from '@kubernetes/client-node';
import {
  ANNOTATIONS,
  GROUP,
  KINDS,
  LABELS,
  LIFECYCLE_MANAGER,
  SKR_WEBHOOK_REGISTRATION,
  type Kyma,
} from '@skr-watcher/api';
import {
  applyObject,
  createClusterClient,
  KcpPkiSecrets,
  readObject,
  type ClusterClient,
} from '@skr-watcher/kube';
import { createCa, webhookTlsSecretName } from '@skr-watcher/pki';
import { silentLogger } from '@skr-watcher/telemetry';
import { registerSkrWebhook } from '../src/registration/index.js';
import { takeOverKyma } from '../src/takeover/index.js';
import { agentOnlyWebhookObjects, upstreamOnlyWebhookObjects } from '../src/takeover/webhook.js';
import { getOrUndefined, kcpAndSkrForSuite } from './support/planes.js';
import { crdYaml, type Json } from './support/modules.js';

const NS = `tw-${process.pid}`;
const KYMA = 'kyma-tw';
const CERT_NS = 'istio-system';
const b64 = (text: string) => Buffer.from(text).toString('base64');

const kyma: Kyma = {
  apiVersion: `${GROUP}/${KINDS.kyma.version}`,
  kind: 'Kyma',
  metadata: {
    name: KYMA,
    namespace: NS,
    labels: { [LABELS.runtimeId]: 'runtime-tw' },
    annotations: { [ANNOTATIONS.skrDomain]: 'tw.example.com' },
  },
  spec: { channel: 'regular', modules: [] },
};

/** Runtime-watcher's chart in an SKR as lifecycle-manager applies it: its field manager, its managed-by label. */
function upstreamWebhookObjects(): KubernetesObject[] {
  const labels = { [LABELS.managedBy]: LIFECYCLE_MANAGER.managedBy };
  const meta = (name: string, namespaced = true) => ({
    name,
    ...(namespaced ? { namespace: 'kyma-system' } : {}),
    labels,
  });
  const selector = { app: 'skr-webhook' };
  return [
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingWebhookConfiguration',
      metadata: meta('skr-webhook', false),
      webhooks: [
        {
          name: 'lifecycle-manager.operator.kyma-project.io',
          admissionReviewVersions: ['v1'],
          objectSelector: { matchLabels: { 'operator.kyma-project.io/watched-by': 'lifecycle-manager' } },
          clientConfig: {
            caBundle: b64('not a CA'),
            service: { name: 'skr-webhook', namespace: 'kyma-system', path: '/validate/lifecycle-manager' },
          },
          rules: [
            {
              apiGroups: ['operator.kyma-project.io'],
              apiVersions: ['*'],
              operations: ['CREATE', 'UPDATE', 'DELETE'],
              resources: ['kymas'],
            },
          ],
          sideEffects: 'NoneOnDryRun',
          timeoutSeconds: 15,
          failurePolicy: 'Ignore',
        },
      ],
    },
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: meta('skr-webhook-tls'),
      type: 'Opaque',
      data: { 'ca.crt': b64('upstream ca'), 'tls.crt': b64('upstream cert'), 'tls.key': b64('upstream key') },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: meta('skr-webhook'),
      spec: { selector, ports: [{ name: 'webhook', port: 443, targetPort: 'watcher-port' }] },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: meta('skr-webhook'),
      spec: {
        replicas: 1,
        selector: { matchLabels: selector },
        template: {
          metadata: { labels: { ...selector, 'operator.kyma-project.io/pod-restart-trigger': '1' } },
          spec: {
            serviceAccountName: 'skr-webhook-sa',
            containers: [
              {
                name: 'server',
                image: 'europe-docker.pkg.dev/kyma-project/prod/runtime-watcher:latest',
                ports: [{ containerPort: 8443, name: 'watcher-port' }],
              },
            ],
          },
        },
      },
    },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta('skr-webhook-sa') },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: meta('kyma-reader', false),
      rules: [
        { apiGroups: ['operator.kyma-project.io'], resources: ['kymas'], verbs: ['get', 'watch', 'list'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: meta('read-kymas', false),
      subjects: [{ kind: 'ServiceAccount', name: 'skr-webhook-sa', namespace: 'kyma-system' }],
      roleRef: { kind: 'ClusterRole', name: 'kyma-reader', apiGroup: 'rbac.authorization.k8s.io' },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: meta('skr-webhook-metrics'),
      spec: { selector, ports: [{ name: 'http-metrics', port: 2112, targetPort: 'metrics-port' }] },
    },
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: meta('skr-webhook-config'),
      data: { kcpAddr: 'kcp:443' },
    },
    {
      apiVersion: 'scheduling.k8s.io/v1',
      kind: 'PriorityClass',
      metadata: meta('skr-webhook-priority', false),
      value: 1000000000,
      globalDefault: false,
    },
    ...['seed-to-watcher', 'watcher-to-apiserver', 'metrics-to-watcher', 'watcher-to-dns'].map((policy) => ({
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: meta(`kyma-project.io--${policy}`),
      spec: { podSelector: { matchLabels: selector }, policyTypes: ['Egress'] },
    })),
  ] as KubernetesObject[];
}

/** cert-manager's Certificate kind, as much of it as the KCP needs to store one. */
const CERTIFICATE_CRD = parse(crdYaml('cert-manager.io', 'Certificate')) as KubernetesObject;

describe('skr-agent takeover: lifecycle-manager’s SKR webhook and certificate replaced by the agent’s', function () {
  this.timeout(180_000);
  const planes = kcpAndSkrForSuite();
  let kcp: ClusterClient;
  let skr: ClusterClient;

  before(async function () {
    kcp = await createClusterClient(planes.kcp);
    skr = await createClusterClient(planes.skr);
    const kcpCore = planes.kcp.makeApiClient(CoreV1Api);
    for (const name of [NS, CERT_NS]) await kcpCore.createNamespace({ body: { metadata: { name } } });
    await getOrUndefined(() =>
      planes.skr.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: 'kyma-system' } } }),
    );
    const ca = createCa({ commonName: 'takeover-test-ca', keyBits: 2048 });
    const secrets = new KcpPkiSecrets(kcpCore, NS);
    await secrets.createCa(ca, {});
    await secrets.writeBundle(ca.certPem);

    // What lifecycle-manager left: its webhook in the SKR, its certificate of this SKR in KCP.
    for (const object of upstreamWebhookObjects())
      await applyObject(skr.objects, object, { fieldManager: LIFECYCLE_MANAGER.fieldManager, force: true });
    await applyObject(kcp.objects, CERTIFICATE_CRD, { fieldManager: 'test', force: true });
    for (let attempt = 0; ; attempt++) {
      try {
        await applyObject(
          kcp.objects,
          {
            apiVersion: 'cert-manager.io/v1',
            kind: 'Certificate',
            metadata: { name: `${KYMA}-webhook-tls`, namespace: CERT_NS },
            spec: {
              commonName: 'runtime-tw',
              secretName: `${KYMA}-webhook-tls`,
              issuerRef: { name: 'klm-watcher-selfsigned', kind: 'Issuer' },
            },
          } as KubernetesObject,
          { fieldManager: LIFECYCLE_MANAGER.fieldManager, force: true },
        );
        break;
      } catch (error) {
        // A fresh CRD is served a moment after it is created.
        if (attempt > 50) throw error;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
    await kcpCore.createNamespacedSecret({
      namespace: CERT_NS,
      body: {
        metadata: {
          name: `${KYMA}-webhook-tls`,
          namespace: CERT_NS,
          labels: { [LABELS.managedBy]: LIFECYCLE_MANAGER.managedBy },
        },
        type: 'kubernetes.io/tls',
        data: {
          'tls.crt': b64('upstream cert'),
          'tls.key': b64('upstream key'),
          'ca.crt': b64('upstream ca'),
        },
      },
    });
  });
  after(async function () {
    await kcp?.close();
    await skr?.close();
  });

  const skrClients = {
    forKyma: async () => ({
      kyma: KYMA,
      client: skr,
      secret: { namespace: NS, name: 'kubeconfig', resourceVersion: '1' },
    }),
  };
  const takeOver = (handBack = false) =>
    takeOverKyma(
      { kcp, skrClients, namespace: NS, certificateNamespace: CERT_NS, handBack, logger: silentLogger() },
      kyma,
    );
  const deploymentAvailable = () =>
    planes.skr.makeApiClient(AppsV1Api).patchNamespacedDeploymentStatus({
      name: 'skr-webhook',
      namespace: 'kyma-system',
      body: [{ op: 'add', path: '/status', value: { replicas: 1, readyReplicas: 1, availableReplicas: 1 } }],
    });
  const read = (apiVersion: string, kind: string, name: string, namespace?: string) =>
    readObject(skr.objects, { apiVersion, kind, name, ...(namespace ? { namespace } : {}) });
  const configuration = () =>
    read('admissionregistration.k8s.io/v1', 'ValidatingWebhookConfiguration', 'skr-webhook');
  const managersOf = (object: KubernetesObject | undefined) =>
    ((object?.metadata?.managedFields ?? []) as Json[]).map((entry) => entry.manager as string);
  const register = () =>
    registerSkrWebhook({
      kcp,
      namespace: NS,
      kyma,
      skr,
      moduleKinds: [],
      options: { image: 'example/skr-webhook:test', kcpAddress: 'kcp.example.com:8082' },
      now: new Date(),
      watchers: [],
    });

  it("installs the agent's webhook first: upstream's objects go only once the agent's serves; the configuration is never deleted", async function () {
    const original = await configuration();
    expect(original?.metadata?.uid).to.be.a('string');

    // Before the agent's registration: only upstream's Deployment goes (the agent's cannot replace it in place).
    const first = await takeOver();
    expect(first.done).to.equal(false);
    expect(first.webhook).to.deep.include({ state: 'waiting' });
    expect(first.webhook?.removed).to.deep.equal(['Deployment skr-webhook']);
    expect(await read('apps/v1', 'Deployment', 'skr-webhook', 'kyma-system')).to.equal(undefined);
    for (const ref of upstreamOnlyWebhookObjects('kyma-system'))
      expect(
        await readObject(skr.objects, ref),
        `${ref.kind} ${ref.name} stays while the agent's is missing`,
      ).to.not.equal(undefined);

    // The agent's registration writes over the objects that share its names, and creates its Deployment.
    const registered = await register();
    expect(registered.ok, registered.message).to.equal(true);
    expect((await configuration())?.metadata?.uid, 'the configuration is taken over in place').to.equal(
      original?.metadata?.uid,
    );

    const second = await takeOver();
    expect(second.webhook).to.deep.include({
      state: 'waiting',
      reason: "the agent's webhook Deployment is not available yet",
    });
    for (const ref of upstreamOnlyWebhookObjects('kyma-system'))
      expect(
        await readObject(skr.objects, ref),
        `${ref.kind} ${ref.name} stays while the agent's does not serve`,
      ).to.not.equal(undefined);

    // The Deployment's controller reports the agent's webhook available.
    await deploymentAvailable();

    const third = await takeOver();
    expect(third.done, JSON.stringify(third)).to.equal(true);
    for (const ref of upstreamOnlyWebhookObjects('kyma-system'))
      expect(await readObject(skr.objects, ref), `${ref.kind} ${ref.name}`).to.equal(undefined);
    const taken = await configuration();
    expect(taken?.metadata?.uid).to.equal(original?.metadata?.uid);
    expect(managersOf(taken)).to.not.include(LIFECYCLE_MANAGER.fieldManager);
    const hooks = (((taken as Json).webhooks ?? []) as Json[]).map((hook) => hook.name as string);
    expect(hooks, "upstream's own webhook entry is gone").to.not.include(
      'lifecycle-manager.operator.kyma-project.io',
    );
    for (const [kind, name] of [
      ['Secret', 'skr-webhook-tls'],
      ['Service', 'skr-webhook'],
    ] as const) {
      const object = await read('v1', kind, name, 'kyma-system');
      expect(object, `${kind} ${name}`).to.not.equal(undefined);
      expect(managersOf(object), `${kind} ${name}`).to.not.include(LIFECYCLE_MANAGER.fieldManager);
    }
    const service = (await read('v1', 'Service', 'skr-webhook', 'kyma-system')) as Json;
    expect(service.spec.selector, "the Service selects the agent's pods only").to.deep.equal({
      'app.kubernetes.io/name': 'skr-webhook',
    });

    // KCP: upstream's Certificate and Secret are gone, the agent's certificate Secret stays.
    expect(third.certificates).to.have.members([
      `Certificate.cert-manager.io ${CERT_NS}/${KYMA}-webhook-tls`,
      `Secret ${CERT_NS}/${KYMA}-webhook-tls`,
    ]);
    const inKcp = (apiVersion: string, kind: string, name: string, namespace: string) =>
      readObject(kcp.objects, { apiVersion, kind, name, namespace });
    const upstreamName = `${KYMA}-webhook-tls`;
    expect(await inKcp('cert-manager.io/v1', 'Certificate', upstreamName, CERT_NS)).to.equal(undefined);
    expect(await inKcp('v1', 'Secret', upstreamName, CERT_NS)).to.equal(undefined);
    expect(await inKcp('v1', 'Secret', webhookTlsSecretName(KYMA), NS)).to.not.equal(undefined);

    // The agent's next registration finds its own objects as it left them.
    const again = await register();
    expect(again.ok).to.equal(true);
    expect(again.restored ?? []).to.deep.equal([]);
    // And a takeover run again has nothing left to do.
    const fourth = await takeOver();
    expect(fourth).to.deep.include({ done: true, certificates: [] });
    expect(fourth.webhook?.removed).to.deep.equal([]);
  });

  it("hands back: the agent's Deployment goes first, the rest of its webhook once lifecycle-manager's serves again", async function () {
    const original = await configuration();
    const first = await takeOver(true);
    expect(first.webhook).to.deep.include({
      state: 'waiting',
      reason: "lifecycle-manager's webhook configuration is not written yet",
    });
    expect(first.webhook?.removed).to.deep.equal(['Deployment skr-webhook']);
    for (const ref of agentOnlyWebhookObjects('kyma-system'))
      expect(await readObject(skr.objects, ref), `${ref.kind} ${ref.name}`).to.not.equal(undefined);

    // Lifecycle-manager, started again, applies its chart over the shared objects and creates its Deployment.
    for (const object of upstreamWebhookObjects())
      await applyObject(skr.objects, object, { fieldManager: LIFECYCLE_MANAGER.fieldManager, force: true });
    expect((await takeOver(true)).webhook).to.deep.include({ state: 'waiting' });
    await deploymentAvailable();

    const done = await takeOver(true);
    expect(done.done, JSON.stringify(done)).to.equal(true);
    for (const ref of agentOnlyWebhookObjects('kyma-system'))
      expect(await readObject(skr.objects, ref), `${ref.kind} ${ref.name}`).to.equal(undefined);
    const configurationNow = await configuration();
    expect(configurationNow?.metadata?.uid).to.equal(original?.metadata?.uid);
    for (const object of [
      configurationNow,
      await read('v1', 'Secret', 'skr-webhook-tls', 'kyma-system'),
      await read('v1', 'Service', 'skr-webhook', 'kyma-system'),
    ])
      expect(managersOf(object), object?.kind).to.not.include(SKR_WEBHOOK_REGISTRATION.fieldManager);
    const hooks = (((configurationNow as Json).webhooks ?? []) as Json[]).map((hook) => hook.name as string);
    expect(hooks).to.deep.equal(['lifecycle-manager.operator.kyma-project.io']);
  });
});
