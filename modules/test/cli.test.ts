// Journeys of the skr-modules binary against the real testenv registry: run it, read its output and exit code.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { parseAllDocuments } from 'yaml';
import { moduleReleaseMetaSchema, moduleTemplateSchema } from '@skr-watcher/api';
import { createModuleSource, registryConfigFromFlags } from '@skr-watcher/oci';
import { startRegistry, type Registry } from '@skr-watcher/testenv';
import { GREETER_CRD, GREETER_DEFAULT_CR, greeterOperator, skrModules } from './journey.js';

const OPERATOR = greeterOperator('registry.example/greeter:1.2.0');
const CRD = GREETER_CRD;
const DEFAULT_CR = GREETER_DEFAULT_CR;

describe('skr-modules', function () {
  this.timeout(600_000);
  let dir: string;
  let registry: Registry;
  const auth = { username: 'publisher', password: 'x-9' };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'skr-modules-'));
    await writeFile(join(dir, 'greeter.yaml'), `${CRD}---\n${OPERATOR}`);
    await writeFile(join(dir, 'default-cr.yaml'), DEFAULT_CR);
    await mkdir(join(dir, 'manifests'));
    await writeFile(join(dir, 'manifests', '1-crd.yaml'), CRD);
    await writeFile(join(dir, 'manifests', '2-operator.yml'), OPERATOR);
    await writeFile(join(dir, 'manifests', 'README.md'), 'not a manifest');
    registry = await startRegistry({ auth });
    await writeFile(join(dir, 'config.json'), registry.dockerConfigJson());
  });
  after(async () => {
    await registry?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const connection = () => [
    `http://${registry.host}`,
    '--subpath',
    'kyma',
    '--credentials',
    join(dir, 'config.json'),
  ];

  it('--help names both commands; --version prints the version; exit 0', async () => {
    const help = await skrModules(['--help']);
    expect(help.code).to.equal(0);
    expect(help.stdout).to.include('publish').and.include('inspect').and.include('--oci-registry-host');
    const version = await skrModules(['--version']);
    expect(version.code).to.equal(0);
    expect(version.stdout.trim()).to.equal('0.1.0');
    const publishHelp = await skrModules(['publish', '--help']);
    expect(publishHelp.stdout).to.include('--default-cr').and.include('--channel');
  });

  it('exits 2 with the reason for a usage mistake, before touching a registry', async () => {
    const missing = await skrModules(['publish', '--name', 'greeter']);
    expect(missing.code).to.equal(2);
    expect(missing.stderr).to.include('--registry is required');
    const badVersion = await skrModules([
      'publish',
      '--registry',
      'http://127.0.0.1:1',
      '--name',
      'greeter',
      '--version',
      'one',
      '--manifest',
      join(dir, 'greeter.yaml'),
    ]);
    expect(badVersion.code).to.equal(2);
    expect(badVersion.stderr).to.include('--version one is not a semantic version');
    const noFile = await skrModules([
      'publish',
      '--registry',
      'http://127.0.0.1:1',
      '--name',
      'greeter',
      '--version',
      '1.0.0',
      '--manifest',
      join(dir, 'nope.yaml'),
    ]);
    expect(noFile.code).to.equal(2);
    expect(noFile.stderr).to.include('nope.yaml: ENOENT');
  });

  it('publishes a version and prints a ModuleTemplate and ModuleReleaseMeta the agent reads', async () => {
    const [registryArg, ...rest] = connection();
    const result = await skrModules([
      'publish',
      '--registry',
      registryArg!,
      ...rest,
      '--name',
      'greeter',
      '--version',
      '1.2.0',
      '--manifest',
      join(dir, 'greeter.yaml'),
      '--default-cr',
      join(dir, 'default-cr.yaml'),
      '--channel',
      'regular',
      '--channel',
      'fast',
      '--image',
      'greeter-operator=registry.example/greeter:1.2.0',
      '--manager',
      'Deployment:greeter-system/greeter-operator',
    ]);
    expect(result.code, result.stderr).to.equal(0);
    expect(result.stderr).to.match(
      /published kyma-project\.io\/module\/greeter:1\.2\.0 to 127\.0\.0\.1:\d+\/kyma \(2 objects/,
    );
    const [template, releaseMeta] = parseAllDocuments(result.stdout).map(
      (d) => d.toJS() as Record<string, unknown>,
    );
    const mt = moduleTemplateSchema.parse(template);
    expect(mt.metadata.name).to.equal('greeter-1.2.0');
    expect(mt.spec.moduleName).to.equal('greeter');
    expect(mt.spec.data).to.deep.include({ kind: 'Greeter' });
    expect(mt.spec.manager).to.deep.equal({
      group: 'apps',
      version: 'v1',
      kind: 'Deployment',
      name: 'greeter-operator',
      namespace: 'greeter-system',
    });
    const mrm = moduleReleaseMetaSchema.parse(releaseMeta);
    expect(mrm.spec).to.deep.equal({
      moduleName: 'greeter',
      ocmComponentName: 'kyma-project.io/module/greeter',
      channels: [
        { channel: 'regular', version: '1.2.0' },
        { channel: 'fast', version: '1.2.0' },
      ],
    });

    const source = createModuleSource(
      registryConfigFromFlags({
        ociRegistryHost: `http://${registry.host}`,
        modulesRepositorySubpath: 'kyma',
        dockerConfigJson: registry.dockerConfigJson(),
      }),
    );
    try {
      const resolved = await source.resolve(mrm.spec.ocmComponentName!, mt.spec.version!);
      expect(resolved.localizedImages).to.deep.equal(['registry.example/greeter:1.2.0']);
      expect(resolved.layers.map((l) => [l.name, l.type])).to.deep.equal([
        ['raw-manifest', 'oci-dir'],
        ['default-cr', 'oci-dir'],
      ]);
      const objects = await source.rawManifestObjects(resolved.install.source);
      expect(objects.map((o) => o.kind)).to.deep.equal(['CustomResourceDefinition', 'Deployment']);
    } finally {
      await source.close();
    }
  });

  it('publishes a directory of manifests joined in name order, mandatory, as JSON', async () => {
    const [registryArg, ...rest] = connection();
    const result = await skrModules([
      'publish',
      '--registry',
      registryArg!,
      ...rest,
      '--name',
      'greeter',
      '--version',
      '2.0.0',
      '--manifest',
      join(dir, 'manifests'),
      '--mandatory',
      '-o',
      'json',
    ]);
    expect(result.code, result.stderr).to.equal(0);
    const list = JSON.parse(result.stdout) as { items: Record<string, unknown>[] };
    const mrm = moduleReleaseMetaSchema.parse(list.items[1]);
    expect(mrm.spec.mandatory).to.deep.equal({ version: '2.0.0' });
    expect(moduleTemplateSchema.parse(list.items[0]).metadata.labels).to.deep.include({
      'operator.kyma-project.io/mandatory-module': 'true',
    });
  });

  it('inspect lists components, their versions, and what a version holds', async () => {
    const all = await skrModules(['inspect', ...connection()]);
    expect(all.code, all.stderr).to.equal(0);
    expect(all.stdout).to.match(/kyma-project\.io\/module\/greeter\s+1\.2\.0, 2\.0\.0/);
    const versions = await skrModules([
      'inspect',
      ...connection().slice(0, 1),
      'kyma-project.io/module/greeter',
      ...connection().slice(1),
    ]);
    expect(versions.stdout.trim().split('\n')).to.deep.equal(['1.2.0', '2.0.0']);
    const one = await skrModules([
      'inspect',
      connection()[0]!,
      'kyma-project.io/module/greeter:1.2.0',
      ...connection().slice(1),
    ]);
    expect(one.code, one.stderr).to.equal(0);
    expect(one.stdout).to.include('raw-manifest').and.include('localBlob').and.include('application/x-tar');
    expect(one.stdout).to.match(/Deployment\s+greeter-system\s+greeter-operator/);
    expect(one.stdout).to.include('localizedImages: registry.example/greeter:1.2.0');
  });

  it('exits 1 with a reason for a registry that refuses, lacks the version or is down', async () => {
    const anonymous = await skrModules([
      'inspect',
      `http://${registry.host}`,
      'kyma-project.io/module/greeter:1.2.0',
    ]);
    expect(anonymous.code).to.equal(1);
    expect(anonymous.stderr).to.include('[Unauthorized]');
    const missing = await skrModules([
      'inspect',
      connection()[0]!,
      'kyma-project.io/module/greeter:9.0.0',
      ...connection().slice(1),
    ]);
    expect(missing.code).to.equal(1);
    expect(missing.stderr).to.include('not found').and.include('[NotFound]');
    const down = await skrModules(['inspect', 'http://127.0.0.1:1', 'x.io/y:1.0.0']);
    expect(down.code).to.equal(1);
    expect(down.stderr).to.include('unreachable').and.include('[RegistryUnreachable]');
  });
});
