// Foundation: the test control planes are real, separate, validate with our CRDs, and leave no process behind.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { ApiException, CustomObjectsApi, CoreV1Api } from '@kubernetes/client-node';
import { GROUP, VERSIONS } from '@skr-watcher/api';
import { sharedEnvironment } from '@skr-watcher/testenv';

const CLI = fileURLToPath(new URL('../../packages/testenv/src/cli.ts', import.meta.url));

/** PIDs of kube-apiserver and etcd processes whose command line mentions `dir`. */
function controlPlanePidsUnder(dir: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let cmdline = '';
    try {
      cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ');
    } catch {
      continue; // exited while we looked
    }
    if (/(kube-apiserver|etcd) /.test(cmdline) && cmdline.includes(dir)) pids.push(Number(entry));
  }
  return pids;
}

async function waitUntil(check: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return check();
}

describe('testenv control planes', function () {
  this.timeout(180_000);

  it('are separate API servers: a namespace created in kcp is absent in skr1', async () => {
    const env = await sharedEnvironment();
    const kcp = env.plane('kcp').kubeConfig().makeApiClient(CoreV1Api);
    const skr = env.plane('skr1').kubeConfig().makeApiClient(CoreV1Api);
    const name = `sep-${Date.now()}`;
    await kcp.createNamespace({ body: { metadata: { name } } });
    const inKcp = await kcp.readNamespace({ name });
    expect(inKcp.metadata?.name).to.equal(name);
    const error = await skr.readNamespace({ name }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).to.be.instanceOf(ApiException);
    expect((error as ApiException<unknown>).code).to.equal(404);
  });

  it('serve the Kyma CRD, whose schema makes the API server reject an invalid Kyma', async () => {
    const env = await sharedEnvironment();
    const api = env.plane('kcp').kubeConfig().makeApiClient(CustomObjectsApi);
    const kyma = (channel: unknown, name: string) => ({
      apiVersion: `${GROUP}/${VERSIONS.kyma}`,
      kind: 'Kyma',
      metadata: { name, namespace: 'default' },
      spec: { channel, modules: [{ name: 'sample' }] },
    });
    const params = { group: GROUP, version: VERSIONS.kyma, namespace: 'default', plural: 'kymas' };
    await api.createNamespacedCustomObject({ ...params, body: kyma('regular', `valid-${Date.now()}`) });
    const error = await api
      .createNamespacedCustomObject({ ...params, body: kyma('NOT A CHANNEL', 'invalid') })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).to.be.instanceOf(ApiException);
    const apiError = error as ApiException<string>;
    expect(apiError.code).to.equal(422);
    // The API server's own validation message, naming the field and the pattern.
    expect(String(apiError.body))
      .to.match(/spec\.channel/)
      .and.match(/should match/);
  });

  it('install the CRDs with their schema extensions intact (preserve-unknown-fields keeps a Module CR spec)', async () => {
    const env = await sharedEnvironment();
    const api = env.plane('kcp').kubeConfig().makeApiClient(CustomObjectsApi);
    const name = `mc-${Date.now()}`;
    const spec = { replicas: 3, nested: { free: ['form'] } };
    await api.createNamespacedCustomObject({
      group: GROUP,
      version: VERSIONS.moduleConfig,
      namespace: 'default',
      plural: 'moduleconfigs',
      body: {
        apiVersion: `${GROUP}/${VERSIONS.moduleConfig}`,
        kind: 'ModuleConfig',
        metadata: { name },
        spec: {
          kyma: 'k',
          module: 'sample',
          resource: { apiVersion: `${GROUP}/v1alpha1`, kind: 'Sample', metadata: { name: 's' }, spec },
        },
      },
    });
    const stored = (await api.getNamespacedCustomObject({
      group: GROUP,
      version: VERSIONS.moduleConfig,
      namespace: 'default',
      plural: 'moduleconfigs',
      name,
    })) as { spec: { resource: { spec: unknown } } };
    expect(stored.spec.resource.spec).to.deep.equal(spec);
  });

  for (const signal of ['SIGINT', 'SIGKILL'] as const) {
    it(`leave no kube-apiserver or etcd behind when skr-testenv up gets ${signal}`, async () => {
      const dir = await mkdtemp(join(tmpdir(), 'skr-testenv-cli-'));
      try {
        const child = spawn(
          process.execPath,
          ['--import', 'tsx', '--conditions=source', CLI, 'up', '--planes', 'a,b', '--dir', dir],
          {
            stdio: ['ignore', 'pipe', 'pipe'],
          },
        );
        let out = '';
        child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
        child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        expect(await waitUntil(() => out.includes('ready:'), 90_000), out).to.equal(true);
        // One etcd and two API servers are running for this directory.
        expect(controlPlanePidsUnder(dir)).to.have.length(3);
        child.kill(signal);
        await exited;
        expect(await waitUntil(() => controlPlanePidsUnder(dir).length === 0, 15_000)).to.equal(true);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  }
});
