// What the agent's ServiceAccount may change in KCP where RBAC cannot bound it (decision 022): the shipped
// admission policies (manifests/kcp/agent-writes-policy.yaml) on a real KCP API server, the shipped Role bound to the
// ServiceAccount. The agent writes webhook certificate Secrets and Kyma / SyncResource metadata; it is refused the CA,
// the trust bundle, the listener's certificate, kubeconfig Secrets and any spec change. Other users are not matched.
import { expect } from 'chai';
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type V1Secret,
} from '@kubernetes/client-node';
import { GROUP, KINDS } from '@skr-watcher/api';
import { CA_BUNDLE_SECRET_NAME, CA_SECRET_NAME, LISTENER_TLS_SECRET_NAME } from '@skr-watcher/pki';
import { startEnvironment, type Environment } from '@skr-watcher/testenv';
import { waitUntil } from '../../test/support/eventually.js';
import { kubeConfigAsAgent } from '../../test/support/kcp-rbac.js';
import { untilCrdsServe } from './support/planes.js';

const NAMESPACE = 'agent-writes';
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** The API's answer to a write: ok, or the HTTP code and the message. */
async function answerOf(write: Promise<unknown>): Promise<{ ok: true } | { code?: number; message: string }> {
  try {
    await write;
    return { ok: true };
  } catch (error) {
    const e = error as { code?: number; body?: unknown };
    return { ...(e.code !== undefined ? { code: e.code } : {}), message: String(e.body ?? error) };
  }
}

const secret = (name: string, type: string): V1Secret => ({
  metadata: { name, namespace: NAMESPACE },
  type,
  data:
    type === 'kubernetes.io/tls'
      ? { 'tls.crt': '', 'tls.key': '' }
      : { key: Buffer.from('v').toString('base64') },
});

describe('manifests/kcp: the agent writes only what is its own (admission policy under the shipped Role)', function () {
  this.timeout(180_000);
  let env: Environment;
  let admin: KubeConfig;
  let agent: KubeConfig;

  before(async () => {
    env = await startEnvironment({ planes: ['kcp'] });
    admin = env.plane('kcp').kubeConfig();
    await untilCrdsServe([admin]);
    await admin.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NAMESPACE } } });
    // The PKI as skr-certs leaves it, a kubeconfig Secret as the provisioner writes it.
    for (const [name, type] of [
      [CA_SECRET_NAME, 'Opaque'],
      [CA_BUNDLE_SECRET_NAME, 'Opaque'],
      [LISTENER_TLS_SECRET_NAME, 'kubernetes.io/tls'],
      ['kyma-a', 'Opaque'],
    ] as const) {
      await admin
        .makeApiClient(CoreV1Api)
        .createNamespacedSecret({ namespace: NAMESPACE, body: secret(name, type) });
    }
    // Installs the Role, binds it to the ServiceAccount and waits until the Secret policy is in effect.
    agent = await kubeConfigAsAgent(admin, NAMESPACE);
    // The spec policy is another object, seen by the API server on its own: wait for it too.
    const { version, plural } = KINDS.kyma;
    const probe = { group: GROUP, version, plural, namespace: NAMESPACE, name: 'probe' };
    await admin.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      ...probe,
      body: {
        apiVersion: `${GROUP}/${version}`,
        kind: KINDS.kyma.kind,
        metadata: { name: 'probe' },
        spec: { channel: 'regular' },
      },
    });
    let channel = 0;
    await waitUntil(
      'the spec policy refuses the agent a Kyma spec change',
      async () => {
        const answer = await answerOf(
          agent
            .makeApiClient(CustomObjectsApi)
            .patchNamespacedCustomObject(
              { ...probe, body: { spec: { channel: channel++ % 2 ? 'regular' : 'fast' } } },
              mergePatch,
            ),
        );
        return 'code' in answer && answer.code === 403;
      },
      60_000,
    );
  });

  after(async () => {
    await env?.stop();
  });

  it('lets the agent create, replace and delete an SKR webhook certificate', async () => {
    const core = agent.makeApiClient(CoreV1Api);
    const leaf = secret('kyma-a-webhook-tls', 'kubernetes.io/tls');
    expect(await answerOf(core.createNamespacedSecret({ namespace: NAMESPACE, body: leaf }))).to.deep.equal({
      ok: true,
    });
    const read = await core.readNamespacedSecret({ name: 'kyma-a-webhook-tls', namespace: NAMESPACE });
    expect(
      await answerOf(
        core.replaceNamespacedSecret({
          name: 'kyma-a-webhook-tls',
          namespace: NAMESPACE,
          body: { ...read, data: { 'tls.crt': 'eA==', 'tls.key': 'eA==' } },
        }),
      ),
    ).to.deep.equal({ ok: true });
    expect(
      await answerOf(core.deleteNamespacedSecret({ name: 'kyma-a-webhook-tls', namespace: NAMESPACE })),
    ).to.deep.equal({ ok: true });
  });

  for (const name of [CA_SECRET_NAME, CA_BUNDLE_SECRET_NAME, LISTENER_TLS_SECRET_NAME, 'kyma-a']) {
    it(`refuses the agent a replace and a delete of Secret ${name}, and says why`, async () => {
      const core = agent.makeApiClient(CoreV1Api);
      const read = await core.readNamespacedSecret({ name, namespace: NAMESPACE });
      const replaced = await answerOf(
        core.replaceNamespacedSecret({
          name,
          namespace: NAMESPACE,
          body: { ...read, data: { ...read.data, injected: 'eA==' } },
        }),
      );
      expect(replaced).to.include({ code: 403 });
      expect((replaced as { message: string }).message).to.contain(`not Secret ${name}`);
      expect(await answerOf(core.deleteNamespacedSecret({ name, namespace: NAMESPACE }))).to.include({
        code: 403,
      });
    });
  }

  it('refuses the agent a new Secret that is no webhook certificate (an Opaque one named like a certificate too)', async () => {
    const core = agent.makeApiClient(CoreV1Api);
    for (const body of [secret('planted', 'Opaque'), secret('kyma-b-webhook-tls', 'Opaque')]) {
      expect(
        await answerOf(core.createNamespacedSecret({ namespace: NAMESPACE, body })),
        body.metadata?.name,
      ).to.include({ code: 403 });
    }
  });

  it("still lets another user (skr-certs' credentials) rotate the CA", async () => {
    const core = admin.makeApiClient(CoreV1Api);
    const read = await core.readNamespacedSecret({ name: CA_SECRET_NAME, namespace: NAMESPACE });
    expect(
      await answerOf(
        core.replaceNamespacedSecret({
          name: CA_SECRET_NAME,
          namespace: NAMESPACE,
          body: { ...read, data: { ...read.data, rotated: 'eA==' } },
        }),
      ),
    ).to.deep.equal({ ok: true });
  });

  for (const kind of ['kyma', 'syncResource'] as const) {
    it(`lets the agent patch a ${kind}'s finalizers and labels, and refuses a change of its spec`, async () => {
      const { version, plural } = KINDS[kind];
      const ref = { group: GROUP, version, plural, namespace: NAMESPACE, name: `${kind.toLowerCase()}-1` };
      const spec = kind === 'kyma' ? { channel: 'regular', modules: [] } : { kyma: 'kyma-a', items: [] };
      await admin.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
        ...ref,
        body: {
          apiVersion: `${GROUP}/${version}`,
          kind: KINDS[kind].kind,
          metadata: { name: ref.name },
          spec,
        },
      });
      const api = agent.makeApiClient(CustomObjectsApi);
      const patch = (body: object) => answerOf(api.patchNamespacedCustomObject({ ...ref, body }, mergePatch));
      expect(
        await patch({ metadata: { finalizers: ['operator.kyma-project.io/skr-agent'], labels: { x: 'y' } } }),
      ).to.deep.equal({ ok: true });
      const changed =
        kind === 'kyma'
          ? { spec: { channel: 'fast' } }
          : {
              spec: {
                items: [
                  {
                    name: 'planted',
                    strategy: 'CreateAndSync',
                    resource: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'planted' } },
                  },
                ],
              },
            };
      const refused = await patch(changed);
      expect(refused).to.include({ code: 403 });
      expect((refused as { message: string }).message).to.contain('does not change the spec');
    });
  }
});
