// Cluster clients and the SKR client cache against real API servers.
import { readFile } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { expect } from 'chai';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { LABELS } from '@skr-watcher/api';
import { sharedEnvironment, type Environment } from '@skr-watcher/testenv';
import {
  apiErrorCode,
  createClusterClient,
  createSkrClients,
  isUnreachable,
  kubeConfigFromYaml,
  type ClusterClient,
} from '../src/index.js';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
let seq = 0;

describe('cluster clients (real API servers)', function () {
  this.timeout(60_000);
  let env: Environment;
  let kcp: ClusterClient;

  before(async function () {
    env = await sharedEnvironment();
    kcp = await createClusterClient(env.plane('kcp').kubeConfig(), { name: 'kcp', timeoutMs: 10_000 });
  });

  after(async function () {
    await kcp?.close();
  });

  it('reuses one TLS connection for sequential requests (client-node alone opens one per request)', async function () {
    const client = await createClusterClient(env.plane('skr2').kubeConfig(), { name: 'skr2' });
    try {
      for (let i = 0; i < 40; i++) await client.core.listNamespace();
      await client.objects.read({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'default' } });
      await client.custom.listClusterCustomObject({
        group: 'operator.kyma-project.io',
        version: 'v1beta2',
        plural: 'kymas',
      });
      expect(client.connectionsOpened()).to.equal(1);
    } finally {
      await client.close();
    }
  });

  it('aborts a request to a server that accepts but never answers, after timeoutMs', async function () {
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as { port: number };
    const kubeConfig = env.plane('kcp').kubeConfig();
    kubeConfig.clusters = [{ ...kubeConfig.getCurrentCluster()!, server: `https://127.0.0.1:${port}` }];
    const client = await createClusterClient(kubeConfig, { timeoutMs: 500 });
    try {
      const failure = await client.core.listNamespace().catch((error: unknown) => error);
      expect(failure).to.be.instanceOf(Error);
      expect(isUnreachable(failure)).to.equal(true);
      expect(sockets.size).to.be.greaterThan(0); // it did connect, and gave up waiting
    } finally {
      await client.close();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it('refuses kubeconfigs that are not YAML, lack a cluster, or use plain http, naming the source only', function () {
    expect(() => kubeConfigFromYaml('{{{', 'Secret a/b key config')).to.throw(
      /^Secret a\/b key config: not a kubeconfig/,
    );
    expect(() => kubeConfigFromYaml('apiVersion: v1\nkind: Config\n', 'Secret a/b')).to.throw(
      /no current context/,
    );
    const http = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {token: secret-token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`;
    let message = '';
    try {
      kubeConfigFromYaml(http, 'Secret a/b');
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).to.match(/must be https/);
    expect(message).to.not.include('secret-token');
  });

  describe('SKR client cache', function () {
    let ns: string;
    const secretName = 'kubeconfig-k1';

    beforeEach(async function () {
      seq += 1;
      ns = `skrc-${process.pid}-${seq}`;
      await kcp.core.createNamespace({ body: { metadata: { name: ns } } });
    });

    /** The cache reads Secrets from the API server's watch cache; wait until a write has reached it. */
    async function untilCached(name: string, resourceVersion: string | undefined): Promise<void> {
      for (let attempt = 0; attempt < 250; attempt++) {
        const list = await kcp.core.listNamespacedSecret({ namespace: ns, resourceVersion: '0' });
        const found = list.items.find((secret) => secret.metadata?.name === name);
        if (found?.metadata?.resourceVersion === resourceVersion) return;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      throw new Error(`Secret ${name} at ${resourceVersion ?? 'deleted'} never reached the watch cache`);
    }

    async function writeSecret(plane: string, name = secretName): Promise<void> {
      const config = Buffer.from(await readFile(env.plane(plane).kubeconfigPath, 'utf8')).toString('base64');
      const created = await kcp.core.createNamespacedSecret({
        namespace: ns,
        body: { metadata: { name, labels: { [LABELS.kymaName]: 'k1' } }, data: { config } },
      });
      await untilCached(name, created.metadata?.resourceVersion);
    }

    it('has no client without a Secret, builds one from it, reuses it, and rebuilds it when the Secret changes', async function () {
      const skrs = createSkrClients({ kcp, namespace: ns, timeoutMs: 5_000 });
      try {
        expect(await skrs.forKyma('k1')).to.equal(undefined);

        await writeSecret('skr1');
        const first = await skrs.forKyma('k1');
        expect(first?.client.server).to.equal(env.plane('skr1').url);
        expect(first?.secret).to.include({ namespace: ns, name: secretName });
        await first!.client.core.listNamespace();
        expect(await skrs.forKyma('k1')).to.equal(first);
        // Concurrent callers share one build.
        const [a, b] = await Promise.all([skrs.forKyma('k1'), skrs.forKyma('k1')]);
        expect(a).to.equal(first);
        expect(b).to.equal(first);

        const skr2 = Buffer.from(await readFile(env.plane('skr2').kubeconfigPath, 'utf8')).toString('base64');
        const patched = await kcp.core.patchNamespacedSecret(
          { namespace: ns, name: secretName, body: { data: { config: skr2 } } },
          mergePatch,
        );
        await untilCached(secretName, patched.metadata?.resourceVersion);
        const second = await skrs.forKyma('k1');
        expect(second).to.not.equal(first);
        expect(second?.client.server).to.equal(env.plane('skr2').url);
        await second!.client.core.listNamespace();
        expect(skrs.size()).to.equal(1);
        // The replaced client's pool is closed.
        const closed = await first!.client.core.listNamespace().catch((error: unknown) => error);
        expect(closed).to.be.instanceOf(Error);

        await kcp.core.deleteNamespacedSecret({ namespace: ns, name: secretName });
        await untilCached(secretName, undefined);
        expect(await skrs.forKyma('k1')).to.equal(undefined);
        expect(skrs.size()).to.equal(0);
      } finally {
        await skrs.close();
      }
    });

    it('reports a broken Secret and two Secrets for one Kyma as errors that name the Secrets', async function () {
      const skrs = createSkrClients({ kcp, namespace: ns });
      try {
        const created = await kcp.core.createNamespacedSecret({
          namespace: ns,
          body: {
            metadata: { name: 'broken', labels: { [LABELS.kymaName]: 'k1' } },
            data: { config: Buffer.from('not: [a kubeconfig').toString('base64') },
          },
        });
        await untilCached('broken', created.metadata?.resourceVersion);
        const broken = await skrs.forKyma('k1').catch((error: unknown) => error);
        expect(String(broken)).to.match(new RegExp(`Secret ${ns}/broken key config: not a kubeconfig`));

        await writeSecret('skr1', 'another');
        const two = await skrs.forKyma('k1').catch((error: unknown) => error);
        expect(String(two)).to.match(
          /2 kubeconfig Secrets \(.*broken.*another|2 kubeconfig Secrets \(.*another.*broken/,
        );
        expect(apiErrorCode(two)).to.equal(undefined);
      } finally {
        await skrs.close();
      }
    });
  });
});
