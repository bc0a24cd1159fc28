// `--metrics-secure` against a real API server (decision 023): /metrics over HTTPS answers a token whose user the
// shipped reader ClusterRole (skr-watcher-metrics-reader) is bound to, refuses a valid token without it (403)
// and no or an unknown token (401); probes stay open. The agent asks with the shipped metrics-auth ClusterRole
// (skr-agent-metrics-auth) only, not as an admin. Both come from manifests/kcp/metrics-auth-rbac.yaml.
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { request } from 'node:https';
import { parseAllDocuments } from 'yaml';
import { CoreV1Api, KubeConfig, RbacAuthorizationV1Api, type V1ClusterRole } from '@kubernetes/client-node';
import { sharedEnvironment } from '@skr-watcher/testenv';
import { createRegistry, startHealthServer, type HealthServer } from '@skr-watcher/telemetry';
import { metricsSecurity } from '../src/metrics-security.js';

const METRICS_RBAC = fileURLToPath(new URL('../../manifests/kcp/metrics-auth-rbac.yaml', import.meta.url));

async function shippedClusterRole(name: string): Promise<V1ClusterRole> {
  const docs = parseAllDocuments(await readFile(METRICS_RBAC, 'utf8')).map((d) => d.toJS() as V1ClusterRole);
  const role = docs.find((doc) => doc?.kind === 'ClusterRole' && doc.metadata?.name === name);
  if (!role) throw new Error(`${METRICS_RBAC} holds no ClusterRole ${name}`);
  return role;
}

describe('/metrics with TokenReview and SubjectAccessReview on a real API server', function () {
  this.timeout(120_000);
  const suffix = `${Date.now()}`;
  const namespace = `metrics-auth-${suffix}`;
  let admin: KubeConfig;
  let server: HealthServer;
  const tokens: Record<'reader' | 'stranger' | 'agent', string> = { reader: '', stranger: '', agent: '' };
  /** GET over HTTPS, trusting the server's self-signed certificate (the token is what is checked). */
  const get = (path: string, token?: string) =>
    new Promise<{ status: number; text: string; authenticate?: string }>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: server.port,
          path,
          rejectUnauthorized: false,
          headers: token ? { authorization: `Bearer ${token}` } : {},
        },
        (response) => {
          let text = '';
          response.on('data', (chunk: Buffer) => (text += chunk.toString()));
          response.on('end', () =>
            resolve({
              status: response.statusCode ?? 0,
              text,
              ...(response.headers['www-authenticate']
                ? { authenticate: String(response.headers['www-authenticate']) }
                : {}),
            }),
          );
        },
      );
      req.on('error', reject);
      req.end();
    });

  before(async () => {
    admin = (await sharedEnvironment()).plane('kcp').kubeConfig();
    const core = admin.makeApiClient(CoreV1Api);
    const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    // The shipped ClusterRoles, under names of this run, each bound to one ServiceAccount of this namespace.
    const bind = async (roleName: string, account: string) => {
      const role = await shippedClusterRole(roleName);
      const name = `${role.metadata?.name}-${suffix}`;
      await rbac.createClusterRole({ body: { ...role, metadata: { name } } });
      await rbac.createClusterRoleBinding({
        body: {
          metadata: { name },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
          subjects: [{ kind: 'ServiceAccount', name: account, namespace }],
        },
      });
    };
    for (const account of Object.keys(tokens) as (keyof typeof tokens)[]) {
      await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: account } } });
      const issued = await core.createNamespacedServiceAccountToken({
        name: account,
        namespace,
        body: { spec: { audiences: [], expirationSeconds: 3600 } },
      });
      tokens[account] = issued.status?.token ?? '';
    }
    await bind('skr-watcher-metrics-reader', 'reader');
    await bind('skr-agent-metrics-auth', 'agent');
    const cluster = admin.getCurrentCluster()!;
    const asAgent = new KubeConfig();
    asAgent.loadFromOptions({
      clusters: [cluster],
      users: [{ name: 'agent', token: tokens.agent }],
      contexts: [{ name: 'agent', cluster: cluster.name, user: 'agent' }],
      currentContext: 'agent',
    });
    const registry = createRegistry();
    const secure = await metricsSecurity({ metricsSecure: true }, asAgent);
    server = await startHealthServer({ host: '127.0.0.1', port: 0, registry, ...(secure ? { secure } : {}) });
  });
  after(async () => {
    await server?.close();
    const rbac = admin?.makeApiClient(RbacAuthorizationV1Api);
    for (const name of [`skr-watcher-metrics-reader-${suffix}`, `skr-agent-metrics-auth-${suffix}`]) {
      await rbac?.deleteClusterRoleBinding({ name }).catch(() => {});
      await rbac?.deleteClusterRole({ name }).catch(() => {});
    }
    await admin
      ?.makeApiClient(CoreV1Api)
      .deleteNamespace({ name: namespace })
      .catch(() => {});
  });

  it('answers a token whose user may get /metrics', async () => {
    const response = await get('/metrics', tokens.reader);
    expect(response.status).to.equal(200);
    expect(response.text).to.include('process_cpu_seconds_total');
  });

  it('refuses a valid token whose user may not (403), and no or an unknown token (401)', async () => {
    const stranger = await get('/metrics', tokens.stranger);
    expect(stranger.status).to.equal(403);
    expect(stranger.text).not.to.include('process_cpu');
    const none = await get('/metrics');
    expect(none.status).to.equal(401);
    expect(none.authenticate).to.equal('Bearer');
    expect((await get('/metrics', 'not-a-token')).status).to.equal(401);
  });

  it('keeps the probes open over HTTPS', async () => {
    expect((await get('/healthz')).status).to.equal(200);
    expect((await get('/readyz')).status).to.equal(200);
  });

  it('refuses a TLS flag without --metrics-secure, and a certificate without its key', async () => {
    let failure: unknown;
    await metricsSecurity({ metricsTlsCert: 'x.crt' }, admin).catch((error: unknown) => (failure = error));
    expect(String(failure)).to.match(/need --metrics-secure/);
    failure = undefined;
    await metricsSecurity({ metricsSecure: true, metricsTlsCert: 'x.crt' }, admin).catch(
      (error: unknown) => (failure = error),
    );
    expect(String(failure)).to.match(/go together/);
  });
});
