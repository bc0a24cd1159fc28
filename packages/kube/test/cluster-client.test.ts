// Cluster clients and the SKR client cache against real API servers.
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createServer, type Socket } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { expect } from 'chai';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { LABELS, LIMITS } from '@skr-watcher/api';
import { createCa, issueLeaf } from '@skr-watcher/pki';
import { sharedEnvironment, type Environment } from '@skr-watcher/testenv';
import { errorCodeOf } from '../../../test/support/error-code.js';
import { hugeBody, malformedKubeconfig, startHostileSkr } from '../../../test/support/hostile-skr.js';
import {
  apiErrorCode,
  createClusterClient,
  createSkrClients,
  isResponseTooLarge,
  KubeconfigRefusedError,
  isUnreachable,
  kubeConfigFromYaml,
  listInPages,
  describeRequest,
  readObject,
  secretVersion,
  type ClusterClient,
  type KnownSecret,
  type KubeRequestMetrics,
} from '../src/index.js';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
let seq = 0;

/** A full garbage collection, as happens many times between two passes of one SKR in a busy agent. */
function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

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
      await client.core.listNamespace();
      await client.core.listNamespace();
      // Over HTTP/1.1 the first connection is replaced once after the first request; then it is kept.
      const warm = client.connectionsOpened();
      expect(warm).to.be.at.most(2);
      for (let i = 0; i < 40; i++) await client.core.listNamespace();
      expect(client.connectionsOpened()).to.equal(warm);
      // KubernetesObjectApi's discovery sends two requests side by side: over HTTP/1.1 (see pooledKubeConfig)
      // each request in flight has a connection of its own, so at most one more; none after that.
      await client.objects.read({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'default' } });
      for (let i = 0; i < 10; i++) {
        await client.custom.listClusterCustomObject({
          group: 'operator.kyma-project.io',
          version: 'v1beta2',
          plural: 'kymas',
        });
      }
      expect(client.connectionsOpened()).to.be.at.most(warm + 1);
    } finally {
      await client.close();
    }
  });

  it('asks an API server once which resource serves a kind, for every client of it and every caller at once (client-node: once per client and caller)', async function () {
    const discovery: string[] = [];
    const counters: KubeRequestMetrics = {
      request: (_kind, method, url) => {
        const path = new URL(url).pathname;
        if (path === '/apis/scheduling.k8s.io/v1') discovery.push(`${method} ${path}`);
      },
      connection: () => undefined,
    };
    const config = env.plane('skr2').kubeConfig();
    const clients = await Promise.all(
      [1, 2].map(() => createClusterClient(config, { name: 'skr2', metrics: { kind: 'skr', counters } })),
    );
    try {
      // Five callers per client at once, as the five modules of one Kyma's pass read their default CRs.
      const read = await Promise.all(
        clients.flatMap((client) =>
          Array.from({ length: 5 }, () =>
            readObject(client.objects, {
              apiVersion: 'scheduling.k8s.io/v1',
              kind: 'PriorityClass',
              name: 'system-node-critical',
            }),
          ),
        ),
      );
      expect(read.every((object) => object?.metadata?.name === 'system-node-critical')).to.equal(true);
      expect(discovery).to.deep.equal(['GET /apis/scheduling.k8s.io/v1']);
      // A kind the group-version lacks is asked for again (a CRD may have brought it since), and is not served.
      expect(await clients[0]!.objects.discover('scheduling.k8s.io/v1', 'NoSuchKind')).to.equal(undefined);
      expect(discovery).to.have.length(2);
    } finally {
      await Promise.all(clients.map((client) => client.close()));
    }
  });

  it('refuses an API server whose certificate another CA signed, or that is not the host the kubeconfig names', async function () {
    const yaml = await readFile(env.plane('skr1').kubeconfigPath, 'utf8');
    const otherCa = Buffer.from(createCa({ commonName: 'not-the-apiserver-ca' }).certPem).toString('base64');
    const otherCaYaml = yaml.replace(
      /certificate-authority-data: \S+/,
      `certificate-authority-data: ${otherCa}`,
    );
    const otherName = yaml.replace(
      /(\n\s+)(certificate-authority-data:)/,
      '$1tls-server-name: not-the-apiserver.example$1$2',
    );
    expect(otherCaYaml).not.to.equal(yaml);
    expect(otherName).to.include('tls-server-name: not-the-apiserver.example');
    const codes: string[] = [];
    for (const [name, text] of [
      ['other-ca', otherCaYaml],
      ['other-name', otherName],
    ] as const) {
      const client = await createClusterClient(kubeConfigFromYaml(text, name), { name, timeoutMs: 10_000 });
      try {
        const error = await client.core.readNamespace({ name: 'default' }).then(
          () => undefined,
          (e: unknown) => e,
        );
        codes.push(errorCodeOf(error));
      } finally {
        await client.close();
      }
    }
    expect(codes).to.deep.equal(['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'ERR_TLS_CERT_ALTNAME_INVALID']);
  });

  it('speaks HTTP/1.1 even to a server that offers h2 (undici h2 ran away under aborted requests: decision 012)', async function () {
    const ca = createCa({ commonName: 'alpn-test-ca' });
    const leaf = issueLeaf({
      ca,
      runtimeId: 'alpn-test',
      dnsNames: ['localhost'],
      ipAddresses: ['127.0.0.1'],
    });
    const negotiated: (string | false | null)[] = [];
    // A real TLS server that prefers h2, as the API server does; it records the protocol and hangs up.
    const server = createTlsServer(
      { cert: leaf.certPem, key: leaf.keyPem, ALPNProtocols: ['h2', 'http/1.1'] },
      (socket) => {
        negotiated.push(socket.alpnProtocol);
        socket.destroy();
      },
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    const kubeConfig = kubeConfigFromYaml(
      `apiVersion: v1
kind: Config
clusters: [{name: alpn, cluster: {server: "https://127.0.0.1:${port}", certificate-authority-data: ${Buffer.from(ca.certPem).toString('base64')}}}]
users: [{name: alpn, user: {token: alpn-token}}]
contexts: [{name: alpn, context: {cluster: alpn, user: alpn}}]
current-context: alpn
`,
      'test kubeconfig',
    );
    const client = await createClusterClient(kubeConfig, { timeoutMs: 5_000 });
    try {
      await client.core.listNamespace().catch(() => undefined);
      expect(negotiated.length).to.be.greaterThan(0);
      expect([...new Set(negotiated)]).to.deep.equal(['http/1.1']);
    } finally {
      await client.close();
      await new Promise((resolve) => server.close(resolve));
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

    it("sends an SKR's sequential requests over one connection, and after the idle timeout resumes its TLS session, collected garbage or not", async function () {
      const skrs = createSkrClients({ kcp, namespace: ns, timeoutMs: 5_000 });
      try {
        await writeSecret('skr1');
        const skr = (await skrs.forKyma('k1'))!.client;
        for (let i = 0; i < 5; i++) await skr.core.listNamespace();
        expect(skr.connectionsOpened(), 'connections of one pass').to.equal(1);
        // undici closes a connection idle for 4 s; the next pass of this SKR comes a resync interval later.
        await new Promise((resolve) => setTimeout(resolve, 4_500));
        collectGarbage();
        for (let i = 0; i < 5; i++) await skr.core.listNamespace();
        expect(skr.connectionsOpened()).to.equal(2);
        expect(skr.connectionsResumed(), 'the second connection resumed the session of the first').to.equal(
          1,
        );
      } finally {
        await skrs.close();
      }
    });

    it('does not read the Secret again while the watch reports the uid/resourceVersion its client was built from', async function () {
      let known: KnownSecret | undefined;
      const skrs = createSkrClients({ kcp, namespace: ns, timeoutMs: 5_000, knownSecretOf: () => known });
      try {
        await writeSecret('skr1');
        const first = await skrs.forKyma('k1');
        const secret = await kcp.core.readNamespacedSecret({ namespace: ns, name: secretName });
        known = { name: secretName, version: secretVersion(secret) };
        // Deleted on the server: only a read would notice, so the cached client proves no read happened.
        await kcp.core.deleteNamespacedSecret({ namespace: ns, name: secretName });
        await untilCached(secretName, undefined);
        expect(await skrs.forKyma('k1')).to.equal(first);
        // The watch reports another version (here: gone): the Secret is read, and the client dropped.
        known = undefined;
        expect(await skrs.forKyma('k1')).to.equal(undefined);
        expect(skrs.size()).to.equal(0);
      } finally {
        await skrs.close();
      }
    });

    it('reads a Secret the watch knows by name, never by a label-selected list (a scan of every Secret of the namespace)', async function () {
      const sent: string[] = [];
      const counters: KubeRequestMetrics = {
        request: (_kind, method, url, contentType) => {
          const { verb, resource } = describeRequest(method, url, contentType);
          sent.push(`${verb} ${resource}`);
        },
        connection: () => undefined,
      };
      const counted = await createClusterClient(env.plane('kcp').kubeConfig(), {
        name: 'kcp',
        timeoutMs: 10_000,
        metrics: { kind: 'kcp', counters },
      });
      let known: KnownSecret | undefined;
      const skrs = createSkrClients({
        kcp: counted,
        namespace: ns,
        timeoutMs: 5_000,
        knownSecretOf: () => known,
      });
      try {
        await writeSecret('skr1');
        const written = await kcp.core.readNamespacedSecret({ namespace: ns, name: secretName });
        known = { name: secretName, version: secretVersion(written) };
        // First use (a new replica, or one that just took the Kyma over): one GET.
        const first = await skrs.forKyma('k1');
        expect(first?.client.server).to.equal(env.plane('skr1').url);
        expect(sent).to.deep.equal(['get secrets']);
        // The Secret changes: the watch reports the new version, and the Secret is read by name again.
        const skr2 = Buffer.from(await readFile(env.plane('skr2').kubeconfigPath, 'utf8')).toString('base64');
        const patched = await kcp.core.patchNamespacedSecret(
          { namespace: ns, name: secretName, body: { data: { config: skr2 } } },
          mergePatch,
        );
        known = { name: secretName, version: secretVersion(patched) };
        const second = await skrs.forKyma('k1');
        expect(second?.client.server).to.equal(env.plane('skr2').url);
        expect(await skrs.forKyma('k1')).to.equal(second);
        expect(sent).to.deep.equal(['get secrets', 'get secrets']);

        // The watch lags: the Secret it names no longer belongs to the Kyma, or is gone. The label decides.
        await kcp.core.patchNamespacedSecret(
          { namespace: ns, name: secretName, body: { metadata: { labels: { [LABELS.kymaName]: 'other' } } } },
          mergePatch,
        );
        await writeSecret('skr1', 'kubeconfig-k1-new');
        known = { name: secretName, version: 'stale/1' };
        const third = await skrs.forKyma('k1');
        expect(third?.secret.name).to.equal('kubeconfig-k1-new');
        expect(third?.client.server).to.equal(env.plane('skr1').url);
        expect(sent.slice(2)).to.deep.equal(['get secrets', 'list secrets']);
        await kcp.core.deleteNamespacedSecret({ namespace: ns, name: 'kubeconfig-k1-new' });
        await untilCached('kubeconfig-k1-new', undefined);
        known = { name: 'kubeconfig-k1-new', version: 'stale/2' };
        expect(await skrs.forKyma('k1')).to.equal(undefined);
        expect(sent.slice(4)).to.deep.equal(['get secrets', 'list secrets']);
      } finally {
        await skrs.close();
        await counted.close();
      }
    });

    it('reads at most LIMITS.skrResponseBytes of a 300 MB SKR answer and fails that request only', async function () {
      const body = hugeBody(300 * 1024 * 1024);
      const hostile = await startHostileSkr(body.handler);
      const skrs = createSkrClients({ kcp, namespace: ns, timeoutMs: 60_000 });
      try {
        const created = await kcp.core.createNamespacedSecret({
          namespace: ns,
          body: {
            metadata: { name: secretName, labels: { [LABELS.kymaName]: 'k1' } },
            data: { config: Buffer.from(hostile.kubeconfig).toString('base64') },
          },
        });
        await untilCached(secretName, created.metadata?.resourceVersion);
        const skr = await skrs.forKyma('k1');
        const failure = await skr!.client.custom
          .getNamespacedCustomObject({ group: 'g', version: 'v1', plural: 'p', namespace: 'n', name: 'x' })
          .catch((error: unknown) => error);
        expect(isResponseTooLarge(failure), String(failure)).to.equal(true);
        expect(String(failure)).to.include(`limit of ${LIMITS.skrResponseBytes} bytes`);
        // What the server could push is the bound plus socket buffers, not the 300 MB.
        expect(body.sent()).to.be.below(LIMITS.skrResponseBytes + 16 * 1024 * 1024);
        // The same Kyma's client keeps working for the next request, and KCP was never affected.
        await kcp.core.listNamespace();
        const again = await skr!.client.core.listNamespace().catch((error: unknown) => error);
        expect(isResponseTooLarge(again)).to.equal(true);
      } finally {
        await skrs.close();
        await hostile.close();
      }
    });

    it('pages a list and halves the page size while a page exceeds the response bound', async function () {
      // Each object is 1 MiB of whitespace; pages of more than 7 objects exceed the 8 MiB bound.
      const objectBytes = 1024 * 1024;
      const pad = ' '.repeat(objectBytes);
      const total = 20;
      const limits: number[] = [];
      const hostile = await startHostileSkr((request, response) => {
        const url = new URL(request.url ?? '/', 'https://x');
        const limit = Number(url.searchParams.get('limit'));
        const from = Number(url.searchParams.get('continue') || 0);
        limits.push(limit);
        const to = Math.min(total, from + limit);
        const items = Array.from({ length: to - from }, (_, i) => `{"n":${from + i},"pad":"${pad}"}`);
        const next = to < total ? String(to) : '';
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(`{"metadata":{"continue":"${next}"},"items":[${items.join(',')}]}`);
      });
      const client = await createClusterClient(kubeConfigFromYaml(hostile.kubeconfig, 'hostile'), {
        maxResponseBytes: LIMITS.skrResponseBytes,
      });
      try {
        const numbers = await listInPages(
          async ({ limit, continueToken }) => {
            const page = (await client.custom.listClusterCustomObject({
              group: 'g',
              version: 'v1',
              plural: 'p',
              limit,
              ...(continueToken ? { _continue: continueToken } : {}),
            })) as { items: { n: number }[]; metadata?: { continue?: string } };
            return page;
          },
          (item) => item.n,
        );
        expect(numbers).to.deep.equal(Array.from({ length: total }, (_, i) => i));
        expect(limits.slice(0, 5)).to.deep.equal([100, 50, 25, 12, 6]);
      } finally {
        await client.close();
        await hostile.close();
      }
    });

    async function secretWith(kubeconfig: string): Promise<void> {
      const created = await kcp.core.createNamespacedSecret({
        namespace: ns,
        body: {
          metadata: { name: secretName, labels: { [LABELS.kymaName]: 'k1' } },
          data: { config: Buffer.from(kubeconfig).toString('base64') },
        },
      });
      await untilCached(secretName, created.metadata?.resourceVersion);
    }

    it('refuses exec, auth-provider and file references in a kubeconfig Secret: nothing runs, no file is read', async function () {
      const dir = await mkdtemp(join(tmpdir(), 'skr-kubeconfig-'));
      const ran = join(dir, 'exec-ran');
      const tokenFile = join(dir, 'token');
      await writeFile(tokenFile, 'stolen-service-account-token');
      const authorizations: string[] = [];
      const hostile = await startHostileSkr((request, response) => {
        authorizations.push(request.headers.authorization ?? '');
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end('{"kind":"NamespaceList","items":[]}');
      });
      const users = {
        // The plugin only has to start to prove code ran; it need not print a credential.
        exec: `{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: ["-c", "touch ${ran}"], interactiveMode: Never}}`,
        'token-file': `{token-file: ${tokenFile}}`,
        'auth-provider': `{auth-provider: {name: oidc, config: {id-token: x}}}`,
        'client-certificate': `{client-certificate: ${tokenFile}, client-key: ${tokenFile}}`,
      };
      const skrs = createSkrClients({ kcp, namespace: ns });
      try {
        for (const [field, user] of Object.entries(users)) {
          const kubeconfig = hostile.kubeconfig.replace('{token: hostile-token}', user);
          expect(kubeconfig).to.include(field);
          await secretWith(kubeconfig);
          const outcome = await skrs
            .forKyma('k1')
            .then((skr) => skr?.client.core.listNamespace())
            .catch((error: unknown) => error);
          expect(outcome, field).to.be.instanceOf(KubeconfigRefusedError);
          expect(String(outcome)).to.include(`users[0].user uses "${field}", which is refused`);
          await kcp.core.deleteNamespacedSecret({ namespace: ns, name: secretName });
          await untilCached(secretName, undefined);
        }
        const cluster = hostile.kubeconfig.replace(
          'certificate-authority-data:',
          `certificate-authority: ${tokenFile}, x:`,
        );
        await secretWith(cluster);
        const refused = await skrs.forKyma('k1').catch((error: unknown) => error);
        expect(String(refused)).to.include(
          'clusters[0].cluster uses "certificate-authority", which is refused',
        );
        expect(existsSync(ran), 'the exec plugin ran').to.equal(false);
        expect(authorizations.join(' ')).to.not.include('stolen');
      } finally {
        await skrs.close();
        await hostile.close();
        await rm(dir, { recursive: true, force: true });
      }
    });

    it('keeps every byte of a malformed kubeconfig Secret out of the error and its cause chain', async function () {
      const marker = 'pw-MARKER-7f3a9c';
      const malformed = malformedKubeconfig(marker);
      await secretWith(malformed);
      const skrs = createSkrClients({ kcp, namespace: ns });
      try {
        const failure = await skrs.forKyma('k1').catch((error: unknown) => error);
        expect(failure).to.be.instanceOf(Error);
        expect(String(failure)).to.include(`Secret ${ns}/${secretName} key config: not a kubeconfig`);
        const chain: string[] = [];
        for (let current: unknown = failure; current instanceof Error; current = current.cause)
          chain.push(current.message, current.stack ?? '', JSON.stringify(current));
        expect(chain.join('\n')).to.not.include(marker);
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
