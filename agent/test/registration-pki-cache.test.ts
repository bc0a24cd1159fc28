// The KCP PKI Secrets of a registration pass from watches (decision 016), on a real KCP and SKR: run with
// the controller's caches, a no-op pass sends no KCP `get secrets` (the CA, its bundle and the Kyma's leaf came from
// three GETs per pass); a CA rotated, a leaf replaced or deleted directly through the API is still acted on by the
// passes that follow (a leaf under the new CA, the SKR Secret carrying it and the new bundle).
import { readFile } from 'node:fs/promises';
import { expect } from 'chai';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { ANNOTATIONS, GROUP, KINDS, LABELS } from '@skr-watcher/api';
import { KcpPkiSecrets } from '@skr-watcher/kube';
import { createCa, describeCertificate, isSignedBy, issueLeaf, webhookDnsNames } from '@skr-watcher/pki';
import { createRegistry, type Registry } from '@skr-watcher/telemetry';
import { waitUntil } from '../../test/support/eventually.js';
import { kubeConfigAsAgent } from '../../test/support/kcp-rbac.js';
import { seedKcp } from '../../test/support/kcp-seed.js';
import { type WatchCaches } from '../src/reconcile/index.js';
import { createManager } from '../src/manager/index.js';
import { kcpAndSkrForSuite, kymaRef, untilInWatchCache } from './support/planes.js';

const NO_CACHES: WatchCaches = {
  moduleTemplates: () => undefined,
  moduleReleaseMetas: () => undefined,
  watchers: () => undefined,
  moduleConfigs: () => undefined,
};

describe('registration: the CA, bundle and leaf Secrets from watches (real KCP and SKR)', function () {
  this.timeout(180_000);
  const planes = kcpAndSkrForSuite();
  let round = 0;

  /** A KCP namespace with a CA, its bundle and one Kyma on the SKR (URL mode), and a reconciler run as by the controller. */
  async function registeredKyma() {
    round += 1;
    const namespace = `pki-${process.pid}-${round}`;
    const name = `kyma-${round}`;
    const skrNamespace = `pki-skr-${round}`;
    await seedKcp(planes.env, namespace, []);
    const core = planes.kcp.makeApiClient(CoreV1Api);
    const pki = new KcpPkiSecrets(core, namespace);
    const ca = createCa({ commonName: `pki-test-ca-${round}`, keyBits: 2048 });
    await pki.createCa(ca, {});
    await pki.writeBundle(ca.certPem);
    await core.createNamespacedSecret({
      namespace,
      body: {
        metadata: { name: `kubeconfig-${name}`, namespace, labels: { [LABELS.kymaName]: name } },
        stringData: { config: await readFile(planes.env.plane('skr1').kubeconfigPath, 'utf8') },
      },
    });
    await untilInWatchCache(
      () => core.listNamespacedSecret({ namespace, resourceVersion: '0' }),
      `kubeconfig-${name}`,
    );
    await planes.skr.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: skrNamespace } } });
    await planes.kcp.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      ...kymaRef(namespace, name),
      body: {
        apiVersion: `${GROUP}/${KINDS.kyma.version}`,
        kind: KINDS.kyma.kind,
        metadata: {
          name,
          namespace,
          labels: { [LABELS.runtimeId]: `runtime-${round}` },
          annotations: { [ANNOTATIONS.skrWebhookUrl]: 'https://127.0.0.1:9443' },
        },
        spec: { modules: [], sync: { namespace: skrNamespace } },
      },
    });
    const registry = createRegistry();
    const manager = createManager({
      kcp: await kubeConfigAsAgent(planes.kcp, namespace),
      namespace,
      registry,
      skrTimeoutMs: 5_000,
      caches: NO_CACHES,
      registration: {
        options: { image: 'example/skr-webhook:test', kcpAddress: 'kcp.example.com:8082', skrNamespace },
      },
    });
    planes.cleanups.push(() => manager.close());
    const pass = () => manager.reconciler.reconcile(`${namespace}/${name}`);
    return { namespace, name, skrNamespace, pki, ca, registry, pass };
  }

  /** KCP `get secrets` the reconciler sent so far. */
  async function kcpSecretGets(registry: Registry): Promise<number> {
    const values = (await registry.getSingleMetric('skr_agent_kube_requests_total')?.get())?.values ?? [];
    return values
      .filter(
        (v) =>
          v.labels['cluster'] === 'kcp' && v.labels['verb'] === 'get' && v.labels['resource'] === 'secrets',
      )
      .reduce((sum, v) => sum + v.value, 0);
  }

  /** The SKR copy of the leaf: `tls.crt` and `ca.crt` of `skr-webhook-tls`. */
  async function skrCopy(skrNamespace: string): Promise<{ certPem: string; bundlePem: string }> {
    const secret = await planes.skr
      .makeApiClient(CoreV1Api)
      .readNamespacedSecret({ name: 'skr-webhook-tls', namespace: skrNamespace });
    const text = (key: string) => Buffer.from(secret.data?.[key] ?? '', 'base64').toString('utf8');
    return { certPem: text('tls.crt'), bundlePem: text('ca.crt') };
  }

  /** Passes until one sends no KCP `get secrets` (the watches have listed and show the leaf as last written). */
  async function untilQuiet(registry: Registry, pass: () => Promise<unknown>): Promise<void> {
    await waitUntil(
      'a pass without KCP get secrets',
      async () => {
        const before = await kcpSecretGets(registry);
        await pass();
        return (await kcpSecretGets(registry)) === before;
      },
      15_000,
      100,
    );
  }

  /** Passes (a few a second) until `check` holds: what the next passes after the watch delivered a change do. */
  async function passesUntil(what: string, pass: () => Promise<unknown>, check: () => Promise<boolean>) {
    await waitUntil(
      what,
      async () => {
        await pass();
        return check();
      },
      15_000,
      100,
    );
  }

  it('sends no KCP get of the CA, bundle or leaf Secret over no-op passes', async function () {
    const { registry, pass, pki, name, skrNamespace } = await registeredKyma();
    await pass();
    const issued = await pki.readLeaf(name);
    expect(issued, 'the first pass issued the leaf').to.not.equal(undefined);
    await untilQuiet(registry, pass);
    const before = await kcpSecretGets(registry);
    for (let i = 0; i < 5; i++) await pass();
    expect((await kcpSecretGets(registry)) - before, 'KCP get secrets over 5 no-op passes').to.equal(0);
    // Nothing was re-issued meanwhile, and the SKR has the leaf.
    expect((await pki.readLeaf(name))?.resourceVersion).to.equal(issued?.resourceVersion);
    expect((await skrCopy(skrNamespace)).certPem).to.equal(issued?.certPem);
  });

  it('re-issues the leaf under a CA rotated through the API, and hands the SKR the new leaf and bundle', async function () {
    const { registry, pass, pki, name, skrNamespace } = await registeredKyma();
    await pass();
    await untilQuiet(registry, pass);

    // The CA replaced directly (as the end of a rotation leaves it): a new current CA, the bundle with only it.
    const rotated = createCa({ commonName: `pki-test-ca-rotated-${round}`, keyBits: 2048 });
    const read = await pki.readCa();
    await pki.writeCa(read!, { current: rotated }, {});
    await pki.writeBundle(rotated.certPem);
    await passesUntil('the SKR has a leaf signed by the rotated CA and the new bundle', pass, async () => {
      const copy = await skrCopy(skrNamespace);
      return isSignedBy(copy.certPem, rotated.certPem) && copy.bundlePem === rotated.certPem;
    });
    const leaf = await pki.readLeaf(name);
    expect(isSignedBy(leaf!.certPem, rotated.certPem), 'the KCP leaf is under the rotated CA').to.equal(true);
    expect((await skrCopy(skrNamespace)).certPem).to.equal(leaf!.certPem);
    await untilQuiet(registry, pass);
  });

  it('copies a leaf replaced through the API to the SKR, and re-issues one deleted through the API', async function () {
    const { registry, pass, pki, ca, name, skrNamespace } = await registeredKyma();
    await pass();
    await untilQuiet(registry, pass);

    // Someone (skr-certs issue) writes another valid leaf: no pass re-issues it, but the SKR gets it.
    const other = issueLeaf({
      ca,
      runtimeId: `runtime-${round}`,
      dnsNames: webhookDnsNames([]),
      ipAddresses: ['127.0.0.1'],
    });
    await pki.writeLeaf(name, other, ca.certPem);
    await passesUntil(
      'the SKR has the replaced leaf',
      pass,
      async () => (await skrCopy(skrNamespace)).certPem === other.certPem,
    );
    expect((await pki.readLeaf(name))?.certPem, 'kept, not re-issued').to.equal(other.certPem);
    await untilQuiet(registry, pass);

    // Deleted: the next passes issue a new one and copy it.
    await planes.kcp
      .makeApiClient(CoreV1Api)
      .deleteNamespacedSecret({ name: `${name}-webhook-tls`, namespace: pki.namespace });
    await passesUntil('a new leaf issued and copied', pass, async () => {
      const leaf = await pki.readLeaf(name);
      return (
        leaf !== undefined &&
        leaf.certPem !== other.certPem &&
        (await skrCopy(skrNamespace)).certPem === leaf.certPem
      );
    });
    const leaf = await pki.readLeaf(name);
    expect(describeCertificate(leaf!.certPem).commonName).to.equal(`runtime-${round}`);
    await untilQuiet(registry, pass);
  });
});
