// Server-side apply and the read/delete helpers against a real kube-apiserver.
import { expect } from 'chai';
import { PatchStrategy, setHeaderOptions, type KubernetesObject } from '@kubernetes/client-node';
import { GROUP, KINDS } from '@skr-watcher/api';
import { freePort, sharedEnvironment } from '@skr-watcher/testenv';
import {
  applyCustomObject,
  applyCustomStatus,
  applyObject,
  apiErrorCode,
  createClusterClient,
  createIfAbsent,
  deleteCustomObjectIfExists,
  deleteIfExists,
  getCustomObject,
  isConflict,
  isNotFound,
  isUnreachable,
  KubeRequestError,
  mirrorable,
  readObject,
  type ClusterClient,
} from '../src/index.js';

const MANAGER = 'apply-test';
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
let seq = 0;

describe('server-side apply helpers (real API server)', function () {
  this.timeout(60_000);
  let kcp: ClusterClient;
  let skr: ClusterClient;
  let ns: string;

  before(async function () {
    const env = await sharedEnvironment();
    kcp = await createClusterClient(env.plane('kcp').kubeConfig(), { name: 'kcp', timeoutMs: 10_000 });
    skr = await createClusterClient(env.plane('skr1').kubeConfig(), { name: 'skr1', timeoutMs: 10_000 });
  });

  after(async function () {
    await kcp?.close();
    await skr?.close();
  });

  beforeEach(async function () {
    seq += 1;
    ns = `apply-${process.pid}-${seq}`;
    await kcp.core.createNamespace({ body: { metadata: { name: ns } } });
  });

  const configMap = (name: string, data: Record<string, string>) => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, namespace: ns },
    data,
  });

  it('applies with a field manager, and a forced re-apply reverts a foreign edit', async function () {
    await applyObject(kcp.objects, configMap('cm', { a: '1' }), { fieldManager: MANAGER });
    const created = await kcp.core.readNamespacedConfigMap({ namespace: ns, name: 'cm' });
    expect(created.data).to.deep.equal({ a: '1' });
    expect(created.metadata?.managedFields?.map((f) => [f.manager, f.operation])).to.deep.include([
      MANAGER,
      'Apply',
    ]);

    await kcp.core.patchNamespacedConfigMap(
      { namespace: ns, name: 'cm', body: { data: { a: '2' } }, fieldManager: 'someone-else' },
      mergePatch,
    );
    await applyObject(kcp.objects, configMap('cm', { a: '1' }), { fieldManager: MANAGER, force: true });
    expect((await kcp.core.readNamespacedConfigMap({ namespace: ns, name: 'cm' })).data).to.deep.equal({
      a: '1',
    });
  });

  it('an unforced apply of a field another manager owns fails with code 409 and says what it was doing', async function () {
    await applyObject(kcp.objects, configMap('cm', { a: '1' }), { fieldManager: MANAGER });
    await kcp.core.patchNamespacedConfigMap(
      { namespace: ns, name: 'cm', body: { data: { a: '2' } }, fieldManager: 'someone-else' },
      mergePatch,
    );
    const failure = await applyObject(kcp.objects, configMap('cm', { a: '3' }), {
      fieldManager: MANAGER,
    }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).to.be.instanceOf(KubeRequestError);
    expect(isConflict(failure)).to.equal(true);
    expect((failure as KubeRequestError).code).to.equal(409);
    expect((failure as Error).message).to.match(
      new RegExp(`^apply ConfigMap ${ns}/cm: HTTP 409: .*conflict`, 'i'),
    );
    // Wrapping again keeps the code.
    expect(apiErrorCode(new Error('outer', { cause: failure }))).to.equal(409);
  });

  it('applies a custom object, then its status through /status', async function () {
    const ref = {
      group: GROUP,
      version: KINDS.sample.version,
      plural: KINDS.sample.plural,
      namespace: ns,
      name: 's',
    };
    const identity = {
      apiVersion: `${GROUP}/${KINDS.sample.version}`,
      kind: KINDS.sample.kind,
      metadata: { name: 's', namespace: ns },
    };
    await applyCustomObject(
      kcp.custom,
      ref,
      { ...identity, spec: { replicas: 2 }, status: { state: 'Ignored' } },
      {
        fieldManager: MANAGER,
      },
    );
    let sample = (await getCustomObject(kcp.custom, ref)) as { spec: unknown; status?: unknown };
    expect(sample.spec).to.deep.equal({ replicas: 2 });
    expect(sample.status).to.equal(undefined); // the main resource ignores status
    await applyCustomStatus(
      kcp.custom,
      ref,
      { ...identity, status: { state: 'Ready' } },
      { fieldManager: MANAGER },
    );
    sample = (await getCustomObject(kcp.custom, ref)) as typeof sample;
    expect(sample.status).to.deep.equal({ state: 'Ready' });
    expect(sample.spec).to.deep.equal({ replicas: 2 });
  });

  it('answers absent objects by code: read and get give undefined, delete gives false, create-if-absent gives undefined', async function () {
    const ref = { apiVersion: 'v1', kind: 'ConfigMap', name: 'nope', namespace: ns };
    expect(await readObject(kcp.objects, ref)).to.equal(undefined);
    expect(await readObject(kcp.objects, { ...ref, apiVersion: 'example.com/v1', kind: 'Nothing' })).to.equal(
      undefined,
    );
    expect(await deleteIfExists(kcp.objects, ref)).to.equal(false);
    const customRef = {
      group: GROUP,
      version: KINDS.sample.version,
      plural: KINDS.sample.plural,
      namespace: ns,
      name: 'x',
    };
    expect(await getCustomObject(kcp.custom, customRef)).to.equal(undefined);
    expect(await deleteCustomObjectIfExists(kcp.custom, customRef)).to.equal(false);

    expect(await createIfAbsent(kcp.objects, configMap('once', { a: '1' }), MANAGER)).to.not.equal(undefined);
    expect(await createIfAbsent(kcp.objects, configMap('once', { a: '2' }), MANAGER)).to.equal(undefined);
    expect((await kcp.core.readNamespacedConfigMap({ namespace: ns, name: 'once' })).data).to.deep.equal({
      a: '1',
    });
    expect(await deleteIfExists(kcp.objects, { ...ref, name: 'once' })).to.equal(true);
    expect(await readObject(kcp.objects, { ...ref, name: 'once' })).to.equal(undefined);

    const failure = await kcp.core
      .readNamespacedConfigMap({ namespace: ns, name: 'nope' })
      .catch((e: unknown) => e);
    expect(isNotFound(failure)).to.equal(true);
    expect(isUnreachable(failure)).to.equal(false);
  });

  it('mirrorable strips server-owned metadata and status, so the copy can be created in another cluster', async function () {
    await applyObject(kcp.objects, configMap('mirror', { a: '1' }), { fieldManager: MANAGER });
    const read = (await readObject(kcp.objects, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      name: 'mirror',
      namespace: ns,
    })) as (KubernetesObject & { data?: unknown }) | undefined;
    expect(read?.metadata?.uid).to.be.a('string');
    const copy = mirrorable({
      ...read!,
      metadata: { ...read!.metadata, deletionGracePeriodSeconds: 30 },
    }) as KubernetesObject & {
      data?: unknown;
    };
    for (const key of [
      'uid',
      'resourceVersion',
      'creationTimestamp',
      'managedFields',
      'ownerReferences',
      'deletionGracePeriodSeconds',
    ]) {
      expect(copy.metadata).to.not.have.property(key);
    }
    expect(copy.metadata?.name).to.equal('mirror');
    expect(copy.data).to.deep.equal({ a: '1' });
    expect(read?.metadata?.uid).to.be.a('string'); // the original is untouched

    await skr.core.createNamespace({ body: { metadata: { name: ns } } });
    await applyObject(skr.objects, copy, { fieldManager: MANAGER, force: true });
    expect((await skr.core.readNamespacedConfigMap({ namespace: ns, name: 'mirror' })).data).to.deep.equal({
      a: '1',
    });
  });

  it('a cluster that does not answer is reported as unreachable, without an HTTP code', async function () {
    const env = await sharedEnvironment();
    const kubeConfig = env.plane('kcp').kubeConfig();
    const port = await freePort();
    const cluster = kubeConfig.getCurrentCluster()!;
    kubeConfig.clusters = [{ ...cluster, server: `https://127.0.0.1:${port}` }];
    const down = await createClusterClient(kubeConfig, { timeoutMs: 2_000 });
    try {
      const failure = await readObject(down.objects, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        name: 'x',
        namespace: 'y',
      }).catch((e: unknown) => e);
      expect(failure).to.be.instanceOf(Error);
      expect(isUnreachable(failure)).to.equal(true);
      expect(apiErrorCode(failure)).to.equal(undefined);
      // A bug is not an outage.
      expect(isUnreachable(new TypeError('x is not a function'))).to.equal(false);
    } finally {
      await down.close();
    }
  });
});
