// The console against a real KCP API server: every request (the document, the JSON, the stream) is authenticated by
// a real TokenReview and authorized by a real SubjectAccessReview, asked with the agent's shipped RBAC only. No or an
// unknown token: 401; a token whose user may not get Kymas: 403; neither shows any Kyma. A user bound to one Kyma
// sees that Kyma's page only. A revoked binding stops working within the review cache's lifetime.
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import {
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { GROUP, KINDS, LABELS } from '@skr-watcher/api';
import { sharedEnvironment } from '@skr-watcher/testenv';
import { silentLogger } from '@skr-watcher/telemetry';
import { REVIEW_CACHE_MS } from '../src/console/access.js';
import { startConsole, type ConsoleServer } from '../src/console/index.js';
import { createEventStream, type EventStream } from '../src/event-stream.js';
import { waitUntil } from '../../test/support/eventually.js';

const MANIFEST = (file: string) => fileURLToPath(new URL(`../../manifests/kcp/${file}`, import.meta.url));
const KYMA_REF = { group: GROUP, version: KINDS.kyma.version, plural: KINDS.kyma.plural };
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

type Account = 'agent' | 'viewer' | 'alphaOnly' | 'stranger';

describe('console access: TokenReview and SubjectAccessReview on a real API server', function () {
  this.timeout(180_000);
  const suffix = randomBytes(4).toString('hex');
  const namespace = `console-access-${suffix}`;
  const clusterRoles: string[] = [];
  let admin: KubeConfig;
  let events: EventStream;
  let server: ConsoleServer;
  const tokens: Record<Account, string> = { agent: '', viewer: '', alphaOnly: '', stranger: '' };

  const get = async (path: string, token?: string) => {
    const response = await fetch(`http://127.0.0.1:${server.port}${path}`, {
      headers: token ? { authorization: `Bearer ${token}` } : {},
    });
    return {
      status: response.status,
      text: await response.text(),
      type: response.headers.get('content-type'),
    };
  };

  before(async () => {
    admin = (await sharedEnvironment()).plane('kcp').kubeConfig();
    const core = admin.makeApiClient(CoreV1Api);
    const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
    const objects = KubernetesObjectApi.makeApiClient(admin);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    for (const account of Object.keys(tokens) as Account[]) {
      const name = account.toLowerCase();
      await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
      const issued = await core.createNamespacedServiceAccountToken({
        name,
        namespace,
        body: { spec: { audiences: [], expirationSeconds: 3600 } },
      });
      tokens[account] = issued.status?.token ?? '';
    }
    // The agent: the shipped namespaced Role and the shipped review ClusterRole, nothing more.
    for (const file of ['rbac.yaml', 'metrics-auth-rbac.yaml']) {
      for (const document of parseAllDocuments(await readFile(MANIFEST(file), 'utf8'))) {
        const object = document.toJS() as
          | (KubernetesObject & {
              subjects?: { name?: string; namespace?: string }[];
              roleRef?: { name: string };
            })
          | null;
        if (!object || object.kind === 'ServiceAccount') continue;
        if (object.metadata?.name === 'skr-watcher-metrics-reader') continue;
        const clusterScoped = object.kind === 'ClusterRole' || object.kind === 'ClusterRoleBinding';
        const name = clusterScoped ? `${object.metadata?.name}-${suffix}` : object.metadata?.name;
        object.metadata = { name, ...(clusterScoped ? {} : { namespace }) };
        if (object.roleRef && object.kind === 'ClusterRoleBinding') object.roleRef.name = name ?? '';
        for (const subject of object.subjects ?? []) Object.assign(subject, { name: 'agent', namespace });
        if (object.kind === 'ClusterRole') clusterRoles.push(name ?? '');
        await objects.create(object);
      }
    }
    const role = (name: string, resourceNames?: string[]) =>
      rbac.createNamespacedRole({
        namespace,
        body: {
          metadata: { name },
          rules: [
            {
              apiGroups: [GROUP],
              resources: [KINDS.kyma.plural],
              verbs: ['get'],
              ...(resourceNames ? { resourceNames } : {}),
            },
          ],
        },
      });
    const bind = (name: string, account: string) =>
      rbac.createNamespacedRoleBinding({
        namespace,
        body: {
          metadata: { name },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
          subjects: [{ kind: 'ServiceAccount', name: account, namespace }],
        },
      });
    await role('kyma-viewer');
    await bind('kyma-viewer', 'viewer');
    await role('alpha-viewer', ['alpha']);
    await bind('alpha-viewer', 'alphaonly');

    const custom = admin.makeApiClient(CustomObjectsApi);
    for (const [name, state] of [
      ['alpha', 'Ready'],
      ['beta', 'Error'],
    ] as const) {
      await custom.createNamespacedCustomObject({
        ...KYMA_REF,
        namespace,
        body: {
          apiVersion: `${GROUP}/${KINDS.kyma.version}`,
          kind: KINDS.kyma.kind,
          metadata: { name, namespace, labels: { [LABELS.runtimeId]: `runtime-${name}` } },
          spec: { channel: 'regular', modules: [{ name: 'keda' }] },
        },
      });
      await custom.patchNamespacedCustomObjectStatus(
        {
          ...KYMA_REF,
          namespace,
          name,
          body: {
            status: {
              state,
              modules: [{ name: 'keda', state, version: '1.2.0', channel: 'regular' }],
            },
          },
        },
        mergePatch,
      );
    }

    const cluster = admin.getCurrentCluster()!;
    const asAgent = new KubeConfig();
    asAgent.loadFromOptions({
      clusters: [cluster],
      users: [{ name: 'agent', token: tokens.agent }],
      contexts: [{ name: 'agent', cluster: cluster.name, user: 'agent', namespace }],
      currentContext: 'agent',
    });
    events = createEventStream();
    server = await startConsole({
      host: '127.0.0.1',
      port: 0,
      namespace,
      kubeConfig: asAgent,
      events,
      logger: silentLogger(),
    });
    // A fresh RoleBinding can lag behind its creation: wait until the viewer is let in.
    await waitUntil(
      'the viewer is allowed',
      async () => (await get('/api/fleet', tokens.viewer)).status === 200,
    );
  });

  after(async () => {
    await server?.close();
    await events?.close();
    const rbac = admin?.makeApiClient(RbacAuthorizationV1Api);
    for (const name of clusterRoles) {
      await rbac?.deleteClusterRoleBinding({ name }).catch(() => {});
      await rbac?.deleteClusterRole({ name }).catch(() => {});
    }
    await admin
      ?.makeApiClient(CoreV1Api)
      .deleteNamespace({ name: namespace })
      .catch(() => {});
  });

  const everyPath = ['/', '/kymas/alpha', '/api/fleet', '/api/kymas/alpha', '/api/stream'];

  it('answers 401 without a token and with one the API server does not know, and shows no Kyma', async () => {
    for (const token of [undefined, 'not-a-token', `${tokens.viewer.slice(0, -4)}AAAA`]) {
      for (const path of everyPath) {
        const answer = await get(path, token);
        expect(answer.status, `${path} with ${token ? 'a bad token' : 'no token'}`).to.equal(401);
        expect(answer.text).not.to.match(/runtime-(alpha|beta)|keda|1\.2\.0/);
      }
    }
  });

  it('answers 403 to a valid token whose user may not get Kymas, and shows no Kyma', async () => {
    for (const path of everyPath) {
      const answer = await get(path, tokens.stranger);
      expect(answer.status, path).to.equal(403);
      expect(answer.text).not.to.match(/runtime-(alpha|beta)|keda|1\.2\.0/);
    }
  });

  it('shows the fleet and a Kyma to a user who may get Kymas in the namespace', async () => {
    const fleet = await get('/api/fleet', tokens.viewer);
    expect(fleet.status).to.equal(200);
    const report = JSON.parse(fleet.text) as {
      kymas: { total: number; states: Record<string, number> };
      modules: { name: string; states: Record<string, number>; versions: Record<string, number> }[];
      rows: { name: string; state: string }[];
    };
    expect(report.kymas).to.deep.include({ total: 2, states: { Error: 1, Ready: 1 } });
    expect(report.rows.map((row) => [row.name, row.state])).to.deep.equal([
      ['beta', 'Error'],
      ['alpha', 'Ready'],
    ]);
    expect(report.modules).to.deep.equal([
      { name: 'keda', kymas: 2, states: { Ready: 1, Error: 1 }, versions: { '1.2.0': 2 } },
    ]);
    const kyma = await get('/api/kymas/alpha', tokens.viewer);
    expect(kyma.status).to.equal(200);
    const page = JSON.parse(kyma.text) as {
      kyma: { name: string; runtimeId: string; modules: { state: string }[] };
    };
    expect(page.kyma).to.deep.include({ name: 'alpha', runtimeId: 'runtime-alpha' });
    expect(page.kyma.modules.map((module) => module.state)).to.deep.equal(['Ready']);
    expect((await get('/api/kymas/gamma', tokens.viewer)).status).to.equal(404);
    const document = await get('/kymas/alpha', tokens.viewer);
    expect(document.status).to.equal(200);
    expect(document.type).to.match(/^text\/html/);
    // A one-time link: the token in the query opens the document (the page moves it into sessionStorage).
    expect((await get(`/?token=${encodeURIComponent(tokens.viewer)}`)).status).to.equal(200);
    // ... but never the JSON, which takes the Authorization header only.
    expect((await get(`/api/fleet?token=${encodeURIComponent(tokens.viewer)}`)).status).to.equal(401);
  });

  it("lets a user bound to one Kyma see that Kyma's page only", async () => {
    expect((await get('/api/kymas/alpha', tokens.alphaOnly)).status).to.equal(200);
    expect((await get('/kymas/alpha', tokens.alphaOnly)).status).to.equal(200);
    expect((await get('/api/kymas/beta', tokens.alphaOnly)).status).to.equal(403);
    expect((await get('/api/fleet', tokens.alphaOnly)).status).to.equal(403);
    expect((await get('/api/stream', tokens.alphaOnly)).status).to.equal(403);
  });

  it('streams accepted callbacks and Kyma changes to an allowed viewer', async () => {
    const abort = new AbortController();
    const response = await fetch(`http://127.0.0.1:${server.port}/api/stream`, {
      headers: { authorization: `Bearer ${tokens.viewer}` },
      signal: abort.signal,
    });
    expect(response.status).to.equal(200);
    expect(response.headers.get('content-type')).to.match(/^text\/event-stream/);
    let received = '';
    const reading = (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>)
        received += decoder.decode(chunk, { stream: true });
    })().catch(() => {});
    try {
      await waitUntil('the stream opened', () => received.includes(': connected'));
      events.publish({
        runtimeId: 'runtime-alpha',
        kyma: { namespace, name: 'alpha' },
        component: 'lifecycle-manager',
        contract: 'v2',
        watched: { namespace: 'kyma-system', name: 'default' },
        gvk: { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Keda' },
        receivedAt: new Date(),
      });
      await waitUntil('the callback arrives', () =>
        /event: callback\ndata: .*runtime-alpha.*Keda/.test(received),
      );
      await admin
        .makeApiClient(CustomObjectsApi)
        .patchNamespacedCustomObjectStatus(
          { ...KYMA_REF, namespace, name: 'beta', body: { status: { state: 'Warning' } } },
          mergePatch,
        );
      await waitUntil('the change arrives', () =>
        /event: change\ndata: \{"kymas":\[[^\]]*"beta"/.test(received),
      );
    } finally {
      abort.abort();
      await reading;
    }
  });

  it('stops answering a user whose binding was removed within the review cache lifetime', async () => {
    expect((await get('/api/fleet', tokens.viewer)).status).to.equal(200);
    await admin
      .makeApiClient(RbacAuthorizationV1Api)
      .deleteNamespacedRoleBinding({ name: 'kyma-viewer', namespace });
    const removedAt = Date.now();
    await waitUntil(
      'the viewer is refused',
      async () => (await get('/api/fleet', tokens.viewer)).status === 403,
      REVIEW_CACHE_MS + 15_000,
      500,
    );
    expect(Date.now() - removedAt).to.be.below(REVIEW_CACHE_MS + 15_000);
  });
});
