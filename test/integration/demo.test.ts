// Journey test of the one-command demo: `npm run demo -- --once` brings up planes, agent, webhooks and a registry,
// follows a Module CR edit from SKR 1 through a callback into its ModuleConfig in KCP, installs a module from the
// registry into SKR 1, exits 0 and leaves nothing behind (but what a pods run left in the same directory).
// Also the demo's kubelet-like Secret volume, on a real API server.
import { spawn } from 'node:child_process';
import { lstat, mkdir, mkdtemp, readFile, readdir, readlink, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { CoreV1Api } from '@kubernetes/client-node';
import { sharedEnvironment } from '@skr-watcher/testenv';
import { syncSecretToFiles, type SecretFiles } from '../support/system/secret-files.js';

const REPO = fileURLToPath(new URL('../..', import.meta.url));

/** PIDs whose command line mentions `needle` (the demo's scratch directory is in every child's arguments). */
async function processesMentioning(needle: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.includes(needle)) pids.push(Number(entry));
  }
  return pids;
}

describe('npm run demo -- --once', function () {
  this.timeout(420_000);
  let parent: string;

  before(async () => {
    parent = await mkdtemp(join(tmpdir(), 'demo-test-'));
  });

  after(async () => {
    if (parent) await rm(parent, { recursive: true, force: true });
  });

  it('times a Module CR edit reaching its ModuleConfig through the callback, exits 0 and cleans up', async () => {
    const dir = join(parent, 'system');
    // What `npm run demo -- --pods` leaves in the same --dir: the process demo neither refuses nor touches it.
    const podsLeftover = join(dir, 'pods', 'planes', 'etcd.log');
    await mkdir(join(dir, 'pods', 'planes'), { recursive: true });
    await writeFile(podsLeftover, 'left by a pods run\n');
    const child = spawn('npm', ['run', '--silent', 'demo', '--', '--once', '--dir', dir], {
      cwd: REPO,
      // npm puts node_modules/.bin first as well; this makes sure `npm` itself runs on the project's Node.
      env: {
        ...process.env,
        PATH: `${join(REPO, 'node_modules', '.bin')}${delimiter}${process.env['PATH']}`,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    const output = `--- stdout ---\n${stdout}\n--- stderr ---\n${stderr}`;

    expect(code, output).to.equal(0);
    expect(stdout, output).to.match(/\+\d+ ms {2}callback accepted by the KCP listener \(runtime-id skr1\)/);
    expect(stdout, output).to.match(/\+\d+ ms {2}ModuleConfig updated in KCP/);
    expect(stdout, output).to.match(/End to end \(edit sent → ModuleConfig updated in KCP\): \d+ ms/);
    // The round trip through examples/sample-manager and back into the SKR.
    expect(stdout, output).to.match(/\+\d+ ms {2}sample-manager's SyncResource updated in KCP/);
    expect(stdout, output).to.match(/\+\d+ ms {2}ConfigMap kyma-system\/sample-config updated in skr1/);
    expect(stdout, output).to.match(/Round trip \(edit sent → object updated in the SKR\): \d+ ms/);
    // Module installation: published into a real registry, enabled in the SKR Kyma, installed by the agent.
    expect(stdout, output).to.match(
      /Module installation: greeter 1\.0\.0 from the OCI registry http:\/\/127\.0\.0\.1:\d+/,
    );
    expect(stdout, output).to.match(/\+\d+ ms {2}Manifest skr1-greeter-\d+ written in KCP/);
    expect(stdout, output).to.match(
      /\+\d+ ms {2}objects applied in skr1 \(Manifest status\.synced: CustomResourceDefinition greeters\.demo\.kyma-project\.io, ConfigMap greeter-config\)/,
    );
    expect(stdout, output).to.match(/\+\d+ ms {2}module greeter Ready in the status of Kyma skr1 \(KCP\)/);
    expect(stdout, output).to.match(/Module enabled → Manifest Ready: \d+ ms/);
    expect(stdout, output).to.include(
      'In skr1 now: CustomResourceDefinition greeters.demo.kyma-project.io, ConfigMap kyma-system/greeter-config, Greeter kyma-system/default',
    );
    // Drift put back at once: an edit of the greeter's ConfigMap, reverted through the webhook's callback.
    expect(stdout, output).to.match(
      /\+\d+ ms {2}ConfigMap kyma-system\/greeter-config put back in skr1 \(applied by skr-agent\)/,
    );
    expect(stdout, output).to.match(/Drift reverted \(edit sent → object as installed again\): \d+ ms/);
    expect(await readdir(dir), 'scratch directory: only what the pods run left').to.deep.equal(['pods']);
    expect(await readFile(podsLeftover, 'utf8')).to.equal('left by a pods run\n');
    expect(
      await processesMentioning(dir),
      'agent, webhooks, kube-apiservers and etcd are gone',
    ).to.deep.equal([]);
  });
});

describe('demo Secret volume (syncSecretToFiles)', function () {
  this.timeout(120_000);
  const namespace = `secret-files-${Date.now().toString(36)}`;
  let core: CoreV1Api;
  let dir: string;
  let files: SecretFiles | undefined;

  const b64 = (text: string) => Buffer.from(text).toString('base64');
  const until = async (what: string, check: () => boolean | Promise<boolean>) => {
    const deadline = Date.now() + 20_000;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };

  before(async () => {
    const env = await sharedEnvironment();
    core = env.plane('skr1').kubeConfig().makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    dir = await mkdtemp(join(tmpdir(), 'secret-files-'));
  });

  after(async () => {
    await files?.stop();
    await core?.deleteNamespace({ name: namespace }).catch(() => {});
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('writes every key once all are present, then swaps all of them at once on each change', async () => {
    await core.createNamespacedSecret({
      namespace,
      body: { metadata: { name: 'tls', namespace }, data: { 'tls.crt': b64('cert 1') } },
    });
    const errors: Error[] = [];
    files = syncSecretToFiles({
      kubeConfig: (await sharedEnvironment()).plane('skr1').kubeConfig(),
      namespace,
      name: 'tls',
      keys: ['tls.crt', 'tls.key'],
      dir: join(dir, 'volume'),
      onError: (error) => errors.push(error),
    });
    // The first list holds the Secret without tls.key, so it is seen before the complete one below.
    await files.synced();

    await core.replaceNamespacedSecret({
      name: 'tls',
      namespace,
      body: {
        metadata: { name: 'tls', namespace },
        data: { 'tls.crt': b64('cert 1'), 'tls.key': b64('key 1') },
      },
    });
    await files.firstWrite(20_000);
    expect(files.writes(), 'the Secret without tls.key was not written').to.equal(1);
    expect(errors, 'nor tried').to.deep.equal([]);
    expect(await readFile(files.path('tls.crt'), 'utf8')).to.equal('cert 1');
    expect(await readFile(files.path('tls.key'), 'utf8')).to.equal('key 1');
    expect((await lstat(files.path('tls.key'))).isSymbolicLink(), 'stable paths are symlinks').to.equal(true);
    expect((await stat(files.path('tls.key'))).mode & 0o777, 'owner-only files').to.equal(0o600);
    const firstVersion = await readlink(join(dir, 'volume', '..data'));

    await core.replaceNamespacedSecret({
      name: 'tls',
      namespace,
      body: {
        metadata: { name: 'tls', namespace },
        data: { 'tls.crt': b64('cert 2'), 'tls.key': b64('key 2') },
      },
    });
    await until('the second write', () => files?.writes() === 2);
    expect(await readFile(files.path('tls.crt'), 'utf8')).to.equal('cert 2');
    expect(await readFile(files.path('tls.key'), 'utf8')).to.equal('key 2');
    const entries = await readdir(join(dir, 'volume'));
    expect(entries, 'the previous version is gone').to.not.include(firstVersion);
    expect(
      entries.filter((entry) => entry.startsWith('..2')),
      'one version directory',
    ).to.have.length(1);
  });
});
