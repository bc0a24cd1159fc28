// What an SKR client keeps of the kubeconfig it was built from (decision 012): one client is held per
// owned Kyma, so it keeps the credentials it uses and nothing else, and it keeps working without the rest.
import { readFile } from 'node:fs/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { expect } from 'chai';
import { createCa } from '@skr-watcher/pki';
import { sharedEnvironment, type Environment } from '@skr-watcher/testenv';
import { errorCodeOf } from '../../../test/support/error-code.js';
import { createClusterClient, kubeConfigFromYaml, type ClusterClient } from '../src/index.js';

/** A full collection after the current job, so that WeakRefs made in it may be cleared. */
async function collectGarbage(): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve));
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

/** The client built from `yaml`, and whether the KubeConfig it was built from is still reachable. */
async function clientFrom(
  yaml: string,
  name: string,
): Promise<{ client: ClusterClient; kubeConfig: WeakRef<object> }> {
  const kubeConfig = kubeConfigFromYaml(yaml, name);
  const client = await createClusterClient(kubeConfig, { name, timeoutMs: 10_000 });
  return { client, kubeConfig: new WeakRef(kubeConfig) };
}

describe('cluster clients keep only what they use of a kubeconfig (real API servers)', function () {
  this.timeout(60_000);
  let env: Environment;

  before(async function () {
    env = await sharedEnvironment();
  });

  it('lets the KubeConfig of a client-certificate kubeconfig go, and the client still verifies the server and authenticates', async function () {
    const { client, kubeConfig } = await clientFrom(
      await readFile(env.plane('skr1').kubeconfigPath, 'utf8'),
      'skr1',
    );
    try {
      await collectGarbage();
      expect(kubeConfig.deref(), 'the KubeConfig after a collection').to.equal(undefined);
      // Admin only: listing namespaces proves the client certificate went out; TLS proves the CA is in use.
      const namespaces = await client.core.listNamespace();
      expect(namespaces.items.map((ns) => ns.metadata?.name)).to.include('default');
    } finally {
      await client.close();
    }
  });

  it('lets the KubeConfig of a token kubeconfig go, and the client still sends the token on every request', async function () {
    const admin = await createClusterClient(env.plane('skr1').kubeConfig(), { name: 'skr1-admin' });
    const namespace = `token-${process.pid}-${Date.now()}`;
    try {
      await admin.core.createNamespace({ body: { metadata: { name: namespace } } });
      await admin.core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'reader' } } });
      const request = await admin.core.createNamespacedServiceAccountToken({
        namespace,
        name: 'reader',
        body: { spec: { audiences: [], expirationSeconds: 600 } },
      });
      const token = request.status?.token ?? '';
      expect(token).not.to.equal('');
      const cluster = env.plane('skr1').kubeConfig().getCurrentCluster()!;
      const yaml = [
        'apiVersion: v1',
        'kind: Config',
        'clusters:',
        '  - name: skr1',
        '    cluster:',
        `      server: ${cluster.server}`,
        `      certificate-authority-data: ${cluster.caData ?? ''}`,
        'users:',
        '  - name: reader',
        '    user:',
        `      token: ${token}`,
        'contexts:',
        '  - name: skr1',
        '    context: { cluster: skr1, user: reader }',
        'current-context: skr1',
      ].join('\n');
      const { client, kubeConfig } = await clientFrom(yaml, 'reader');
      try {
        await collectGarbage();
        expect(kubeConfig.deref(), 'the KubeConfig after a collection').to.equal(undefined);
        // The service account may not list namespaces: the refusal names who the API server took it for.
        for (let i = 0; i < 2; i++) {
          const refusal = await client.core.listNamespace().then(
            () => undefined,
            (error: unknown) => String((error as { body?: unknown }).body ?? error),
          );
          expect(refusal).to.include(`system:serviceaccount:${namespace}:reader`);
        }
      } finally {
        await client.close();
      }
    } finally {
      await admin.core.deleteNamespace({ name: namespace }).catch(() => undefined);
      await admin.close();
    }
  });

  it('keeps each client on its own CA and certificate while clients with the same ones share them', async function () {
    const skr1 = await readFile(env.plane('skr1').kubeconfigPath, 'utf8');
    const skr2 = await readFile(env.plane('skr2').kubeconfigPath, 'utf8');
    const otherCa = Buffer.from(createCa({ commonName: 'not-the-apiserver-ca' }).certPem).toString('base64');
    const clients: ClusterClient[] = [];
    try {
      // Built in turn, so that held bytes of one cluster are looked up between builds of the other.
      for (const [name, yaml] of [
        ['skr1-a', skr1],
        ['skr2-a', skr2],
        ['skr1-b', skr1],
        [
          'skr1-other-ca',
          skr1.replace(/certificate-authority-data: \S+/, `certificate-authority-data: ${otherCa}`),
        ],
        ['skr2-b', skr2],
      ] as const) {
        clients.push((await clientFrom(yaml, name)).client);
      }
      const outcomes = await Promise.all(
        clients.map((client) =>
          client.core.readNamespace({ name: 'default' }).then(
            () => `${client.name}: ok`,
            (error: unknown) => `${client.name}: ${errorCodeOf(error)}`,
          ),
        ),
      );
      expect(outcomes).to.deep.equal([
        'skr1-a: ok',
        'skr2-a: ok',
        'skr1-b: ok',
        'skr1-other-ca: UNABLE_TO_VERIFY_LEAF_SIGNATURE',
        'skr2-b: ok',
      ]);
    } finally {
      await Promise.all(clients.map((client) => client.close()));
    }
  });
});
