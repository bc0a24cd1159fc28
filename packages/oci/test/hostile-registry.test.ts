// A registry that is down, slow or hostile, as module installation pulls from it: each case fails that module
// only, with a reason and words a user can read in status, and leaves the source able to read other modules.
import { writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { startRegistry, type Registry } from '@skr-watcher/testenv';
import {
  createModuleSource,
  publishModule,
  registryConfigFromFlags,
  type ModuleSource,
} from '../src/index.js';
import {
  CONFIGMAP_YAML,
  failure,
  handTar,
  pushComponent,
  RAW_MANIFEST_TAR_RESOURCE,
  v2Descriptor,
} from './hand-assembled.js';

const GOOD = { name: 'kyma-project.io/module/good', version: '1.0.0' };

describe('module source against a hostile registry', function () {
  this.timeout(600_000);
  let registry: Registry;
  let source: ModuleSource;
  const config = () => registryConfigFromFlags({ ociRegistryHost: `http://${registry.host}` });

  /** A component version of one raw-manifest tar layer, pushed by hand. */
  async function handModule(
    name: string,
    rawManifest: Buffer,
    descriptorResources = RAW_MANIFEST_TAR_RESOURCE,
  ) {
    return pushComponent({
      url: registry.url,
      repository: `component-descriptors/${name}`,
      tag: '1.0.0',
      descriptor: v2Descriptor(name, '1.0.0', descriptorResources),
      layers: [{ name: 'raw-manifest', data: rawManifest, mediaType: 'application/x-tar' }],
    });
  }

  /** A module that stays readable: every failure below must leave it so. */
  async function goodModuleStillReads() {
    const resolved = await source.resolve(GOOD.name, GOOD.version);
    expect(await source.rawManifestObjects(resolved.install.source)).to.have.length(1);
  }

  before(async () => {
    registry = await startRegistry();
    await publishModule(config(), {
      moduleName: 'good',
      version: GOOD.version,
      ocmComponentName: GOOD.name,
      rawManifest: CONFIGMAP_YAML,
    });
    source = createModuleSource({ ...config(), bounds: { maxBlobBytes: 256 * 1024 }, timeoutMs: 2_000 });
  });
  after(async () => {
    await source?.close();
    await registry?.stop();
  });

  it('refuses a blob larger than the bound without reading it whole', async () => {
    const big = `${CONFIGMAP_YAML}---\n${'# padding\n'.repeat(40_000)}`; // ≈ 400 KiB > 256 KiB
    await handModule('kyma-project.io/module/big', handTar([{ name: 'big.yaml', data: big }]));
    const resolved = await source.resolve('kyma-project.io/module/big', '1.0.0');
    const error = await failure(source.rawManifestObjects(resolved.install.source), 'TooLarge');
    expect(error.message).to.match(/more than the bound of 262144 bytes/);
    await goodModuleStillReads();
  });

  it('refuses a stored blob whose bytes do not match its digest, and reads it again once repaired', async () => {
    const blobs = await handModule(
      'kyma-project.io/module/damaged',
      handTar([{ name: 'damaged.yaml', data: CONFIGMAP_YAML }]),
    );
    const stored = registry.blobPath(blobs['raw-manifest']!.digest);
    const original = handTar([{ name: 'damaged.yaml', data: CONFIGMAP_YAML }]);
    await writeFile(
      stored,
      handTar([{ name: 'damaged.yaml', data: CONFIGMAP_YAML.replace('hand', 'evil') }]),
    );
    const resolved = await source.resolve('kyma-project.io/module/damaged', '1.0.0');
    const error = await failure(source.rawManifestObjects(resolved.install.source), 'DigestMismatch');
    expect(error.message).to.include(blobs['raw-manifest']!.digest).and.include('damaged or was replaced');
    await goodModuleStillReads();
    // Nothing of the failure was kept: the repaired blob is read on the next attempt.
    await writeFile(stored, original);
    expect(await source.rawManifestObjects(resolved.install.source)).to.have.length(1);
  });

  it('refuses a malformed descriptor with the place that is wrong', async () => {
    await pushComponent({
      url: registry.url,
      repository: 'component-descriptors/kyma-project.io/module/malformed',
      tag: '1.0.0',
      descriptor:
        'meta:\n  schemaVersion: v2\ncomponent:\n  name: kyma-project.io/module/malformed\n  resources: 7\n',
      layers: [],
    });
    const error = await failure(
      source.resolve('kyma-project.io/module/malformed', '1.0.0'),
      'MalformedDescriptor',
    );
    expect(error.message).to.include('not an OCM component descriptor').and.include('component.version');
    await pushComponent({
      url: registry.url,
      repository: 'component-descriptors/kyma-project.io/module/not-yaml',
      tag: '1.0.0',
      descriptor: 'meta: {schemaVersion: v2\ncomponent: [',
      layers: [],
    });
    const notYaml = await failure(
      source.resolve('kyma-project.io/module/not-yaml', '1.0.0'),
      'MalformedDescriptor',
    );
    expect(notYaml.message).to.include('not valid YAML');
    await goodModuleStillReads();
  });

  it('refuses a descriptor with an access type it does not know, naming the resource', async () => {
    await handModule(
      'kyma-project.io/module/github',
      handTar([{ name: 'm.yaml', data: CONFIGMAP_YAML }]),
      `${RAW_MANIFEST_TAR_RESOURCE}  - name: sources
    type: directoryTree
    relation: external
    version: 1.0.0
    access:
      type: gitHub
      repoUrl: https://github.com/kyma-project/template-operator
`,
    );
    const error = await failure(
      source.resolve('kyma-project.io/module/github', '1.0.0'),
      'UnknownAccessType',
    );
    expect(error.message).to.include('resource sources').and.include('"gitHub"');
    await goodModuleStillReads();
  });

  it('refuses a tar with a path outside itself, or a link that leads out', async () => {
    await handModule(
      'kyma-project.io/module/escape',
      handTar([
        { name: 'module.yaml', data: CONFIGMAP_YAML },
        { name: '../../etc/cron.d/evil', data: 'x' },
      ]),
    );
    const resolved = await source.resolve('kyma-project.io/module/escape', '1.0.0');
    const error = await failure(source.rawManifestObjects(resolved.install.source), 'MalformedArchive');
    expect(error.message).to.include('outside itself').and.include('../../etc/cron.d/evil');

    await handModule(
      'kyma-project.io/module/link',
      handTar([
        { name: 'passwd', type: '2', link: '/etc/passwd' },
        { name: 'module.yaml', data: CONFIGMAP_YAML },
      ]),
    );
    const linked = await source.resolve('kyma-project.io/module/link', '1.0.0');
    const linkError = await failure(source.rawManifestObjects(linked.install.source), 'MalformedArchive');
    expect(linkError.message).to.include('/etc/passwd');
    await goodModuleStillReads();
  });

  it('refuses a YAML alias bomb in the raw manifest', async () => {
    const levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'];
    for (let i = 1; i < 9; i++) {
      const previous = String.fromCharCode(96 + i);
      const name = String.fromCharCode(97 + i);
      levels.push(`${name}: &${name} [${Array(9).fill(`*${previous}`).join(',')}]`);
    }
    const bomb = `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb, namespace: default}\nbomb:\n${levels.map((l) => `  ${l}`).join('\n')}\n`;
    await handModule('kyma-project.io/module/bomb', handTar([{ name: 'bomb.yaml', data: bomb }]));
    const resolved = await source.resolve('kyma-project.io/module/bomb', '1.0.0');
    const error = await failure(source.rawManifestObjects(resolved.install.source), 'MalformedManifest');
    expect(error.message).to.include('alias');
    await goodModuleStillReads();
  });

  it('refuses a raw manifest over a parse bound once: not pulled or parsed again for the same digest', async () => {
    let many = '';
    for (let index = 0; index < 6_000; index++)
      many += `---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c${index}}\n`;
    await handModule('kyma-project.io/module/many', handTar([{ name: 'many.yaml', data: many }]));
    const fresh = createModuleSource(config());
    try {
      const resolved = await fresh.resolve('kyma-project.io/module/many', '1.0.0');
      const first = await failure(fresh.rawManifestObjects(resolved.install.source), 'TooLarge');
      expect(first.message).to.include('more than 5000 YAML documents');
      const sent = fresh.requests();
      const again = await failure(fresh.rawManifestObjects(resolved.install.source), 'TooLarge');
      expect(again.message).to.equal(first.message);
      expect(fresh.requests()).to.deep.equal(sent);
    } finally {
      await fresh.close();
    }
  });

  it('follows a redirect only to the registry host or a host it was allowed, and names the host it refused', async () => {
    // A front that sends every request to the registry under another name of the same machine.
    const port = Number(registry.host.split(':')[1]);
    const front = createServer((request, response) => {
      response.writeHead(307, { location: `http://localhost:${port}${request.url ?? '/'}` });
      response.end();
    });
    await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
    const frontHost = `127.0.0.1:${(front.address() as AddressInfo).port}`;
    const through = (redirectHosts?: string[]) =>
      createModuleSource({
        ...registryConfigFromFlags({ ociRegistryHost: `http://${frontHost}` }),
        ...(redirectHosts ? { redirectHosts } : {}),
      });
    const refusing = through();
    const allowing = through([`localhost:${port}`]);
    try {
      const error = await failure(refusing.resolve(GOOD.name, GOOD.version), 'RegistryError');
      expect(error.message).to.include(`redirected manifest to localhost:${port}`).and.include(frontHost);
      expect((await allowing.resolve(GOOD.name, GOOD.version)).version).to.equal(GOOD.version);
    } finally {
      await refusing.close();
      await allowing.close();
      await new Promise((resolve) => front.close(resolve));
    }
  });

  it('says RegistryTimeout for a registry that accepts connections but does not answer', async () => {
    const fresh = createModuleSource({ ...config(), timeoutMs: 1_500 });
    registry.pause();
    try {
      const error = await failure(fresh.resolve(GOOD.name, GOOD.version), 'RegistryTimeout');
      expect(error.transient).to.equal(true);
      expect(error.message).to.include(registry.host).and.include('did not answer in time');
    } finally {
      registry.resume();
      await fresh.close();
    }
    // Once it answers again, the same source reads it: the failure was not kept.
    const again = createModuleSource(config());
    try {
      expect((await again.resolve(GOOD.name, GOOD.version)).version).to.equal(GOOD.version);
    } finally {
      await again.close();
    }
  });

  it('says RegistryUnreachable when the registry is down, and still serves what it has read', async () => {
    const down = await startRegistry();
    const config = registryConfigFromFlags({ ociRegistryHost: `http://${down.host}` });
    await publishModule(config, {
      moduleName: 'x',
      version: '1.0.0',
      ocmComponentName: 'x.io/x',
      rawManifest: CONFIGMAP_YAML,
    });
    const downSource = createModuleSource(config);
    try {
      const resolved = await downSource.resolve('x.io/x', '1.0.0');
      await downSource.rawManifestObjects(resolved.install.source);
      await down.stop();
      const error = await failure(downSource.resolve('x.io/x', '2.0.0'), 'RegistryUnreachable');
      expect(error.transient).to.equal(true);
      expect(error.message).to.include(down.host).and.include('unreachable');
      // What was read before the registry went away is still served from the cache.
      expect(await downSource.rawManifestObjects(resolved.install.source)).to.have.length(1);
    } finally {
      await downSource.close();
      await down.stop();
    }
  });
});
