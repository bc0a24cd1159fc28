// `skr-modules publish --config-file`: modulectl's module-config.yaml as module teams keep it in their repositories,
// published into the real testenv registry. Journeys: run the binary, read stdout, stderr and the exit code, and read
// back from the registry what the agent would install.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { parseAllDocuments } from 'yaml';
import { moduleReleaseMetaSchema, moduleTemplateSchema } from '@skr-watcher/api';
import { createModuleSource, registryConfigFromFlags } from '@skr-watcher/oci';
import { startRegistry, type Registry } from '@skr-watcher/testenv';
import { GREETER_CRD, GREETER_DEFAULT_CR, greeterOperator, skrModules } from './journey.js';

const MANIFEST = `${GREETER_CRD}---\n${greeterOperator('europe-docker.pkg.dev/kyma-project/prod/greeter-operator:1.3.0')}`;
const DEFAULT_CR = GREETER_DEFAULT_CR;
const SECURITY = `module-name: greeter
bdba:
  - europe-docker.pkg.dev/kyma-project/prod/greeter-operator:1.3.0
  - europe-docker.pkg.dev/kyma-project/prod/external/ghcr.io/greeter/sidecar:0.4.1
mend:
  exclude: ["**/test/**"]
`;

/** A module-config.yaml as modulectl's users write it (paths relative to where the command runs). */
const moduleConfig = (overrides = '') => `name: kyma-project.io/module/greeter
version: 1.3.0
channel: fast
manifest: manifests/greeter.yaml
defaultCR: default-cr.yaml
security: sec-scanners-config.yaml
repository: https://github.com/example/greeter
documentation: https://github.com/example/greeter/blob/main/README.md
icons:
  - name: module-icon
    link: https://github.com/example/greeter/logo.png
manager:
  name: greeter-operator
  namespace: greeter-system
  group: apps
  version: v1
  kind: Deployment
associatedResources:
  - group: operator.kyma-project.io
    version: v1alpha1
    kind: Greeter
labels:
  team.example/owner: greeters
annotations:
  operator.kyma-project.io/doc-url: https://example.test/greeter
beta: true
team: kyma/Greeters
${overrides}`;

describe('skr-modules publish --config-file (modulectl module-config.yaml)', function () {
  this.timeout(600_000);
  let dir: string;
  let registry: Registry;
  let files: Server;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'skr-modules-config-'));
    await mkdir(join(dir, 'manifests'));
    await writeFile(join(dir, 'manifests', 'greeter.yaml'), MANIFEST);
    await writeFile(join(dir, 'default-cr.yaml'), DEFAULT_CR);
    await writeFile(join(dir, 'sec-scanners-config.yaml'), SECURITY);
    await writeFile(join(dir, 'module-config.yaml'), moduleConfig());
    registry = await startRegistry();
    // Release assets served over HTTP, as module-config.yaml often names them.
    files = createServer((request, response) => {
      const name = request.url?.replace(/^\/releases\//, '') ?? '';
      const body = { 'greeter.yaml': MANIFEST, 'default-cr.yaml': DEFAULT_CR }[name];
      response.writeHead(body ? 200 : 404).end(body ?? 'not found');
    });
    await new Promise<void>((resolve) => files.listen(0, '127.0.0.1', resolve));
  });

  after(async () => {
    files?.close();
    await registry?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const parsed = (stdout: string) => {
    const [template, releaseMeta] = parseAllDocuments(stdout).map((d) => d.toJS() as Record<string, unknown>);
    return { mt: moduleTemplateSchema.parse(template), mrm: moduleReleaseMetaSchema.parse(releaseMeta) };
  };

  it("publishes what modulectl's file says: component name, channel, manager, scanned images, template labels", async () => {
    const result = await skrModules(
      ['publish', '--registry', `http://${registry.host}`, '--config-file', 'module-config.yaml'],
      dir,
    );
    expect(result.code, result.stderr).to.equal(0);
    expect(result.stderr).to.contain('warning: --config-file module-config.yaml: team not read');
    expect(result.stderr).to.match(
      /published kyma-project\.io\/module\/greeter:1\.3\.0 to 127\.0\.0\.1:\d+ \(2 objects/,
    );
    const { mt, mrm } = parsed(result.stdout);
    expect(mt.metadata.name).to.equal('greeter-1.3.0');
    expect(mt.metadata.labels).to.deep.include({
      'operator.kyma-project.io/module-name': 'greeter',
      'operator.kyma-project.io/beta': 'true',
      'team.example/owner': 'greeters',
    });
    expect(mt.metadata.annotations).to.deep.include({
      'operator.kyma-project.io/doc-url': 'https://example.test/greeter',
    });
    expect(mt.spec.data).to.deep.include({ kind: 'Greeter' });
    expect(mt.spec.info).to.deep.equal({
      repository: 'https://github.com/example/greeter',
      documentation: 'https://github.com/example/greeter/blob/main/README.md',
      icons: [{ name: 'module-icon', link: 'https://github.com/example/greeter/logo.png' }],
    });
    expect(mt.spec.manager).to.deep.equal({
      name: 'greeter-operator',
      namespace: 'greeter-system',
      group: 'apps',
      version: 'v1',
      kind: 'Deployment',
    });
    expect(mt.spec.associatedResources).to.deep.equal([
      { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Greeter' },
    ]);
    expect(mrm.spec).to.deep.equal({
      moduleName: 'greeter',
      ocmComponentName: 'kyma-project.io/module/greeter',
      channels: [{ channel: 'fast', version: '1.3.0' }],
    });
    const source = createModuleSource(
      registryConfigFromFlags({ ociRegistryHost: `http://${registry.host}` }),
    );
    try {
      const resolved = await source.resolve('kyma-project.io/module/greeter', '1.3.0');
      expect(resolved.localizedImages).to.deep.equal([
        'europe-docker.pkg.dev/kyma-project/prod/greeter-operator:1.3.0',
        'europe-docker.pkg.dev/kyma-project/prod/external/ghcr.io/greeter/sidecar:0.4.1',
      ]);
      const objects = await source.rawManifestObjects(resolved.install.source);
      expect(objects.map((o) => o.kind)).to.deep.equal(['CustomResourceDefinition', 'Deployment']);
    } finally {
      await source.close();
    }
  });

  it('flags given beside the file win over its fields; the defaults of flags do not', async () => {
    const result = await skrModules(
      [
        'publish',
        '--registry',
        `http://${registry.host}`,
        '-c',
        'module-config.yaml',
        '--version',
        '1.3.1',
        '--channel',
        'regular',
        '--output',
        'json',
      ],
      dir,
    );
    expect(result.code, result.stderr).to.equal(0);
    const list = JSON.parse(result.stdout) as { items: Record<string, unknown>[] };
    const mt = moduleTemplateSchema.parse(list.items[0]);
    const mrm = moduleReleaseMetaSchema.parse(list.items[1]);
    expect(mt.metadata.name).to.equal('greeter-1.3.1');
    expect(mt.metadata.namespace).to.equal('kcp-system');
    expect(mrm.spec.channels).to.deep.equal([{ channel: 'regular', version: '1.3.1' }]);
    expect(mt.spec.manager?.name).to.equal('greeter-operator');
  });

  it('downloads a manifest and default CR the file names by URL, and lists the manifest in spec.resources', async () => {
    const base = `http://127.0.0.1:${(files.address() as AddressInfo).port}/releases`;
    const config = moduleConfig()
      .replace('manifest: manifests/greeter.yaml', `manifest: ${base}/greeter.yaml`)
      .replace('defaultCR: default-cr.yaml', `defaultCR: ${base}/default-cr.yaml`)
      .replace('version: 1.3.0', 'version: 1.4.0');
    await writeFile(join(dir, 'by-url.yaml'), config);
    const result = await skrModules(
      ['publish', '--registry', `http://${registry.host}`, '--config-file', 'by-url.yaml'],
      dir,
    );
    expect(result.code, result.stderr).to.equal(0);
    const { mt } = parsed(result.stdout);
    expect(mt.spec.data).to.deep.include({ kind: 'Greeter' });
    expect(mt.spec.resources).to.deep.equal([{ name: 'raw-manifest', link: `${base}/greeter.yaml` }]);

    await writeFile(join(dir, 'missing-url.yaml'), config.replace('greeter.yaml', 'gone.yaml'));
    const missing = await skrModules(
      ['publish', '--registry', `http://${registry.host}`, '--config-file', 'missing-url.yaml'],
      dir,
    );
    expect(missing.code).to.equal(1);
    expect(missing.stderr).to.contain(`--manifest ${base}/gone.yaml: the server answered 404`);
  });

  it('names an unknown flag, what to use for a modulectl flag, and a missing or mistyped field; exit 2', async () => {
    const registryArgs = ['--registry', 'http://127.0.0.1:1'];
    const unknown = await skrModules(
      ['publish', ...registryArgs, '-c', 'module-config.yaml', '--chanel', 'x'],
      dir,
    );
    expect(unknown.code).to.equal(2);
    expect(unknown.stderr)
      .to.contain("error: unknown option '--chanel'")
      .and.contain('Did you mean --channel?');
    const insecure = await skrModules(
      ['publish', ...registryArgs, '-c', 'module-config.yaml', '--insecure'],
      dir,
    );
    expect(insecure.code).to.equal(2);
    expect(insecure.stderr)
      .to.contain("error: unknown option '--insecure'")
      .and.contain('--registry http://host:port');
    const credentials = await skrModules(['publish', ...registryArgs, '--registry-credentials', 'u:p'], dir);
    expect(credentials.code).to.equal(2);
    expect(credentials.stderr).to.contain('--credentials <file>');

    await writeFile(
      join(dir, 'no-version.yaml'),
      'name: kyma-project.io/module/greeter\nmanifest: manifests/greeter.yaml\n',
    );
    const noVersion = await skrModules(['publish', ...registryArgs, '-c', 'no-version.yaml'], dir);
    expect(noVersion.code).to.equal(2);
    expect(noVersion.stderr).to.contain('--config-file no-version.yaml: version is required');
    await writeFile(join(dir, 'bad-type.yaml'), moduleConfig('mandatory: "yes"\n'));
    const badType = await skrModules(['publish', ...registryArgs, '-c', 'bad-type.yaml'], dir);
    expect(badType.code).to.equal(2);
    expect(badType.stderr).to.contain('--config-file bad-type.yaml: mandatory must be true or false');
    const noRegistry = await skrModules(['publish', '-c', 'module-config.yaml'], dir);
    expect(noRegistry.code).to.equal(2);
    expect(noRegistry.stderr).to.contain('--registry is required');
    const noFlags = await skrModules(['publish', ...registryArgs], dir);
    expect(noFlags.code).to.equal(2);
    expect(noFlags.stderr).to.contain('--name is required (or name in --config-file)');
  });
});
