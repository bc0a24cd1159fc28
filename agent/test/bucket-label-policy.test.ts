// A foreign shard bucket label cannot hide a SyncResource from its replica: the shipped admission policy
// (manifests/kcp/bucket-label-policy.yaml) on a real KCP API server refuses a bucket label that is no bucket, on
// SyncResources and ModuleConfigs, and lets the agent's own values and unlabelled objects through.
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import {
  AdmissionregistrationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type V1ValidatingAdmissionPolicy,
  type V1ValidatingAdmissionPolicyBinding,
} from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS, SHARDING } from '@skr-watcher/api';
import { startEnvironment, type Environment } from '@skr-watcher/testenv';
import { parseAllDocuments } from 'yaml';
import { waitUntil } from '../../test/support/eventually.js';

const POLICY = fileURLToPath(new URL('../../manifests/kcp/bucket-label-policy.yaml', import.meta.url));
const NAMESPACE = 'bucket-policy';

describe('manifests/kcp: the shard bucket label admits only buckets', function () {
  this.timeout(180_000);
  let env: Environment;
  let kcp: KubeConfig;
  let serial = 0;

  /** Creates a SyncResource (or ModuleConfig) with the bucket label `bucket`; resolves to the API's answer. */
  const create = async (
    kind: 'syncResource' | 'moduleConfig',
    bucket: string | undefined,
  ): Promise<{ ok: true } | { ok: false; code?: number; message: string }> => {
    const name = `${kind.toLowerCase()}-${serial++}`;
    const spec =
      kind === 'syncResource'
        ? { kyma: 'kyma-a', items: [] }
        : {
            kyma: 'kyma-a',
            module: 'sample',
            resource: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x' } },
          };
    try {
      await kcp.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
        group: GROUP,
        version: KINDS[kind].version,
        plural: KINDS[kind].plural,
        namespace: NAMESPACE,
        body: {
          apiVersion: `${GROUP}/${KINDS[kind].version}`,
          kind: KINDS[kind].kind,
          metadata: { name, ...(bucket === undefined ? {} : { labels: { [LABELS.shardBucket]: bucket } }) },
          spec,
        },
      });
      return { ok: true };
    } catch (error) {
      const e = error as { code?: number; body?: string };
      return {
        ok: false,
        ...(e.code !== undefined ? { code: e.code } : {}),
        message: String(e.body ?? error),
      };
    }
  };

  before(async () => {
    env = await startEnvironment({ planes: ['kcp'] });
    kcp = env.plane('kcp').kubeConfig();
    await kcp.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NAMESPACE } } });
    const admission = kcp.makeApiClient(AdmissionregistrationV1Api);
    for (const document of parseAllDocuments(await readFile(POLICY, 'utf8'))) {
      const body = document.toJS() as { kind: string };
      if (body.kind === 'ValidatingAdmissionPolicy')
        await admission.createValidatingAdmissionPolicy({ body: body as V1ValidatingAdmissionPolicy });
      else
        await admission.createValidatingAdmissionPolicyBinding({
          body: body as V1ValidatingAdmissionPolicyBinding,
        });
    }
    // A new policy takes effect after the API server's informer saw it.
    await waitUntil(
      'the policy refuses a foreign bucket label',
      async () => !(await create('syncResource', 'x')).ok,
      60_000,
    );
  });

  after(async () => {
    await env?.stop();
  });

  for (const foreign of ['team-a', '4096', '007', '99999', '1.5']) {
    it(`refuses a SyncResource labelled ${foreign}, and says why`, async () => {
      const answer = await create('syncResource', foreign);
      expect(answer.ok).to.equal(false);
      if (answer.ok) return;
      expect(answer.code).to.equal(422);
      expect(answer.message).to.contain('is not a shard bucket');
    });
  }

  it('refuses a ModuleConfig with a foreign bucket label', async () => {
    expect((await create('moduleConfig', 'foreign')).ok).to.equal(false);
  });

  it("admits the agent's values (0 to buckets - 1) and no label", async () => {
    for (const bucket of [undefined, '0', '12', String(SHARDING.buckets - 1)]) {
      expect(await create('syncResource', bucket), `label ${bucket}`).to.deep.equal({ ok: true });
    }
    expect(await create('moduleConfig', '7')).to.deep.equal({ ok: true });
  });
});
