// The kit as a module team gets it: `npm run pack:kit` writes tarballs, a project outside the repository installs them
// with npm (third-party packages from the npm registry), and what the team writes there works: a ten-line manager in
// TypeScript type-checks against the kit and keeps a SyncResource for a ModuleConfig on a real KCP API server, and
// `npx skr-modules` answers. Nothing here resolves through the repository's workspaces.
import { spawn, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { FIELD_MANAGER, GROUP, KINDS, LABELS } from '@skr-watcher/api';
import { unsupportedNodeReason } from '@skr-watcher/api/node-version-guard';
import { applyCustomObject } from '@skr-watcher/kube';
import { syncResourceNameOf } from '@skr-watcher/module-manager';
import { freePort, startEnvironment, type Environment } from '@skr-watcher/testenv';
import { eventually } from '../support/eventually.js';
import { olderNode } from '../support/older-node.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
/** npm and npx run on this Node.js (22, from node_modules/.bin), as they would on a module team's machine. */
const env = { ...process.env, PATH: `${dirname(process.execPath)}${delimiter}${process.env['PATH'] ?? ''}` };

const KIT = [
  'skr-watcher-api-0.1.0.tgz',
  'skr-watcher-kube-0.1.0.tgz',
  'skr-watcher-module-manager-0.1.0.tgz',
  'skr-watcher-modules-0.1.0.tgz',
  'skr-watcher-oci-0.1.0.tgz',
  'skr-watcher-pki-0.1.0.tgz',
  'skr-watcher-telemetry-0.1.0.tgz',
];

/** What a team writes: its render and the kit's runModuleManager, the whole program. */
const MANAGER_TS = `import { runModuleManager, type ModuleConfig, type RenderedObject } from '@skr-watcher/module-manager';

// The user's Greeter CR becomes a ConfigMap in their SKR.
function render(config: ModuleConfig): RenderedObject[] {
  const greeting = String(config.spec.resource.spec?.['greeting'] ?? 'hello');
  const metadata = { name: 'greeter-settings', namespace: 'kyma-system' };
  return [{ apiVersion: 'v1', kind: 'ConfigMap', metadata, data: { greeting } }];
}

await runModuleManager({ name: 'greeter-manager', module: 'greeter', version: '1.0.0', render });
`;

function run(command: string, args: string[], cwd: string): SpawnSyncReturns<string> {
  return spawnSync(command, args, { cwd, env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
}

function succeeded(result: SpawnSyncReturns<string>, what: string): string {
  expect(
    result.status,
    `${what}: ${result.stdout}${result.stderr}${result.error ? String(result.error) : ''}`,
  ).to.equal(0);
  return result.stdout;
}

describe('the kit installed from tarballs into a project outside the repository', function () {
  this.timeout(900_000);
  let tarballDir: string;
  let project: string;
  let tarballs: string[];
  let environment: Environment | undefined;

  before(async () => {
    tarballDir = await mkdtemp(join(tmpdir(), 'kit-tarballs-'));
    project = await mkdtemp(join(tmpdir(), 'kit-project-'));
    const packed = run('npm', ['run', '--silent', 'pack:kit', '--', '--out', tarballDir], root);
    tarballs = succeeded(packed, 'npm run pack:kit').trim().split('\n');
    await writeFile(
      join(project, 'package.json'),
      JSON.stringify({ name: 'greeter-manager', private: true, type: 'module' }, null, 2),
    );
    const install = run(
      'npm',
      ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', ...tarballs],
      project,
    );
    succeeded(install, 'npm install <tarballs>');
  });

  after(async () => {
    await environment?.stop();
    await rm(tarballDir, { recursive: true, force: true });
    await rm(project, { recursive: true, force: true });
  });

  it('packs module-manager, modules and their workspace dependencies: built code, bins, no sources', () => {
    expect(project.startsWith(root)).to.equal(false);
    expect(tarballs.map((t) => basename(t)).sort()).to.deep.equal(KIT);
    const scope = join(project, 'node_modules', '@skr-watcher');
    expect(readdirSync(scope).sort()).to.deep.equal(
      KIT.map((t) => t.replace(/^skr-watcher-|-0\.1\.0\.tgz$/g, '')),
    );
    for (const name of readdirSync(scope)) {
      const dir = join(scope, name);
      expect(lstatSync(dir).isSymbolicLink(), `${name} is a link into the repository`).to.equal(false);
      expect(existsSync(join(dir, 'src')), `${name} ships its sources`).to.equal(false);
      const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
        exports: Record<string, { default: string }>;
        dependencies?: Record<string, string>;
      };
      for (const target of Object.values(manifest.exports))
        expect(existsSync(join(dir, target.default)), `${name}: ${target.default}`).to.equal(true);
      for (const [dependency, range] of Object.entries(manifest.dependencies ?? {}))
        if (dependency.startsWith('@skr-watcher/'))
          expect(range, `${name} → ${dependency}`).to.equal('0.1.0');
    }
  });

  it('npx skr-modules --help and --version answer from the project, exit 0', () => {
    const help = succeeded(run('npx', ['skr-modules', '--help'], project), 'skr-modules --help');
    expect(help).to.contain('Usage: skr-modules').and.contain('publish').and.contain('inspect');
    const version = succeeded(run('npx', ['skr-modules', '--version'], project), '--version');
    expect(version.trim()).to.equal('0.1.0');
  });

  it('a ten-line manager in TypeScript type-checks against the kit and keeps the SyncResource of a ModuleConfig on a real KCP', async () => {
    await writeFile(join(project, 'manager.ts'), MANAGER_TS);
    await writeFile(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        // skipLibCheck as `tsc --init` writes it: @kubernetes/client-node's own types name packages it does not install.
        compilerOptions: {
          module: 'nodenext',
          target: 'es2023',
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          types: [],
        },
        include: ['manager.ts'],
      }),
    );
    const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
    succeeded(run(process.execPath, [tsc, '-p', project], project), 'tsc -p <project>');

    environment = await startEnvironment({ planes: ['kcp'] });
    const kcp = environment.plane('kcp');
    const namespace = `kit-${process.pid}`;
    await kcp
      .kubeConfig()
      .makeApiClient(CoreV1Api)
      .createNamespace({ body: { metadata: { name: namespace } } });
    const port = await freePort();
    // Node.js runs the TypeScript file as it is (type stripping), as a team would try it.
    const manager = spawn(
      process.execPath,
      [
        'manager.ts',
        '--kubeconfig',
        kcp.kubeconfigPath,
        '--namespace',
        namespace,
        '--metrics-address',
        `127.0.0.1:${port}`,
      ],
      { cwd: project, env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    manager.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    manager.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => manager.once('exit', (code) => resolve(code)));
    const custom = kcp.kubeConfig().makeApiClient(CustomObjectsApi);
    const ref = (kind: 'moduleConfig' | 'syncResource', name: string) => ({
      group: GROUP,
      version: KINDS[kind].version,
      plural: KINDS[kind].plural,
      namespace,
      name,
    });
    try {
      // The ModuleConfig as skr-agent mirrors a user's Greeter CR into the KCP.
      await applyCustomObject(
        custom,
        ref('moduleConfig', 'skr1-greeter'),
        {
          apiVersion: `${GROUP}/${KINDS.moduleConfig.version}`,
          kind: KINDS.moduleConfig.kind,
          metadata: {
            name: 'skr1-greeter',
            namespace,
            labels: { [LABELS.moduleName]: 'greeter', [LABELS.kymaName]: 'skr1' },
          },
          spec: {
            kyma: 'skr1',
            module: 'greeter',
            resource: {
              apiVersion: 'demo.kyma-project.io/v1alpha1',
              kind: 'Greeter',
              metadata: { name: 'default', namespace: 'kyma-system' },
              spec: { greeting: 'hello from a project of its own' },
            },
          },
        },
        { fieldManager: FIELD_MANAGER, force: true },
      );
      const name = syncResourceNameOf('greeter-manager', 'skr1-greeter');
      const sync = await eventually(
        `SyncResource ${namespace}/${name}`,
        async () =>
          (await custom.getNamespacedCustomObject(ref('syncResource', name))) as {
            spec: {
              kyma: string;
              items: { name: string; strategy: string; resource: Record<string, unknown> }[];
            };
          },
        60_000,
      );
      expect(sync.spec.kyma).to.equal('skr1');
      expect(sync.spec.items).to.have.length(1);
      expect(sync.spec.items[0]?.strategy).to.equal('CreateAndSync');
      expect(sync.spec.items[0]?.resource).to.deep.include({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        data: { greeting: 'hello from a project of its own' },
      });
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
      expect(ready.status).to.equal(200);
    } finally {
      manager.kill('SIGTERM');
    }
    expect(await exited, output).to.equal(0);
  });

  it('on a Node.js older than engines, the installed skr-modules and a program on the kit exit 1 with one line', async function () {
    const older = olderNode();
    if (!older) this.skip();
    const bin = join(project, 'node_modules', '.bin', 'skr-modules');
    const cli = run(older.path, [bin, '--help'], project);
    expect(cli.status, cli.stderr).to.equal(1);
    expect(cli.stderr).to.equal(`${unsupportedNodeReason('skr-modules', older.version)}\n`);
    await writeFile(join(project, 'imports-kit.js'), "import '@skr-watcher/module-manager';\n");
    const program = run(older.path, ['imports-kit.js'], project);
    expect(program.status, program.stderr).to.equal(1);
    expect(program.stderr).to.equal(
      `${unsupportedNodeReason('@skr-watcher/module-manager', older.version)}\n`,
    );
  });
});
