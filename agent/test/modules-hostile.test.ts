// A hostile registry against module installation, on a real KCP, SKR and registry: a blob
// over the bound, a stored blob that does not match its digest, a malformed descriptor, an unknown access type, a tar
// with a path outside itself, a YAML alias bomb, an object of a kind the SKR does not serve. Each fails its module
// only, with a message in the Manifest and the Kyma status; the good module next to them installs; a failed module is
// not pulled again on every pass (backoff), and nothing of a failure is kept once the registry is repaired.
import { writeFile } from 'node:fs/promises';
import { expect } from 'chai';
import { CoreV1Api } from '@kubernetes/client-node';
import { GROUP, KINDS } from '@skr-watcher/api';
import { moduleReleaseMetaFor, moduleTemplateFor } from '@skr-watcher/oci';
import {
  CONFIGMAP_YAML,
  handTar,
  pushComponent,
  RAW_MANIFEST_TAR_RESOURCE,
  v2Descriptor,
} from '../../packages/oci/test/hand-assembled.js';
import { getOrUndefined } from './support/planes.js';
import { configMapYaml, moduleSuite, type Json } from './support/modules.js';

const component = (module: string) => `kyma-project.io/module/${module}`;

describe('module installation from a hostile registry', function () {
  this.timeout(300_000);
  const suite = moduleSuite();

  /** A component version pushed by hand (what no honest tool writes), and its catalog in the KCP. */
  async function handModule(module: string, rawManifest: Buffer, resources = RAW_MANIFEST_TAR_RESOURCE) {
    const blobs = await pushComponent({
      url: suite.state.registry.url,
      repository: `component-descriptors/${component(module)}`,
      tag: '1.0.0',
      descriptor: v2Descriptor(component(module), '1.0.0', resources),
      layers: [{ name: 'raw-manifest', data: rawManifest, mediaType: 'application/x-tar' }],
    });
    await catalog(module);
    return blobs;
  }

  async function catalog(module: string) {
    const version = {
      moduleName: module,
      version: '1.0.0',
      ocmComponentName: component(module),
      rawManifest: '',
    };
    await suite.applyCatalog(moduleTemplateFor(version, { namespace: suite.state.ns }));
    await suite.applyCatalog(moduleReleaseMetaFor(version, { namespace: suite.state.ns }));
  }

  it('fails each hostile module alone, with its reason in the Manifest and the Kyma; the good one installs; no hot loop', async function () {
    await suite.publish({
      moduleName: 'good',
      version: '1.0.0',
      rawManifest: configMapYaml('good-config', 'kyma-system'),
    });
    const tar = (name: string, data: string) => handTar([{ name, data }]);
    // Over the bound given below (64 KiB).
    await handModule('big', tar('big.yaml', `${CONFIGMAP_YAML}---\n${'# padding\n'.repeat(10_000)}`));
    // Stored bytes that are not the digest's.
    const damaged = await handModule('damaged', tar('damaged.yaml', CONFIGMAP_YAML));
    const stored = suite.state.registry.blobPath(damaged['raw-manifest']!.digest);
    await writeFile(stored, tar('damaged.yaml', CONFIGMAP_YAML.replace('hand', 'evil')));
    // A descriptor that is not one.
    await pushComponent({
      url: suite.state.registry.url,
      repository: `component-descriptors/${component('malformed')}`,
      tag: '1.0.0',
      descriptor: `meta:\n  schemaVersion: v2\ncomponent:\n  name: ${component('malformed')}\n  resources: 7\n`,
      layers: [],
    });
    await catalog('malformed');
    // An access type upstream does not know.
    await handModule(
      'github',
      tar('m.yaml', CONFIGMAP_YAML),
      `${RAW_MANIFEST_TAR_RESOURCE}  - name: sources
    type: directoryTree
    relation: external
    version: 1.0.0
    access:
      type: gitHub
      repoUrl: https://github.com/kyma-project/template-operator
`,
    );
    // A tar entry outside the archive.
    await handModule(
      'escape',
      handTar([
        { name: 'module.yaml', data: CONFIGMAP_YAML },
        { name: '../../etc/cron.d/evil', data: 'x' },
      ]),
    );
    // A billion laughs.
    const levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'];
    for (let i = 1; i < 9; i++) {
      const previous = String.fromCharCode(96 + i);
      const name = String.fromCharCode(97 + i);
      levels.push(`${name}: &${name} [${Array(9).fill(`*${previous}`).join(',')}]`);
    }
    await handModule(
      'bomb',
      tar(
        'bomb.yaml',
        `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb, namespace: default}\nbomb:\n${levels.map((l) => `  ${l}`).join('\n')}\n`,
      ),
    );
    // A kind the SKR does not serve.
    await handModule(
      'unserved',
      tar(
        'unserved.yaml',
        `${configMapYaml('unserved-config', 'kyma-system')}---\napiVersion: nowhere.test.io/v1\nkind: Nothing\nmetadata: {name: nothing, namespace: kyma-system}\n`,
      ),
    );

    const hostile = ['big', 'damaged', 'malformed', 'github', 'escape', 'bomb', 'unserved'];
    await suite.kyma(
      'k1',
      ['good', ...hostile].map((name) => ({ name })),
    );
    await suite.start({ bounds: { maxBlobBytes: 64 * 1024 } });
    const settled = async () => {
      const modules: Json[] = (await suite.kcpKyma('k1')).status?.modules ?? [];
      const state = (name: string) => modules.find((m) => m.name === name)?.state;
      return state('good') === 'Ready' && hostile.every((name) => state(name) === 'Error');
    };
    await suite.reconcileUntil('k1', settled, 'good Ready, every hostile module Error');

    const expected: Record<string, RegExp> = {
      big: /more than the bound of 65536 bytes/,
      damaged: /damaged or was replaced/,
      malformed: /not an OCM component descriptor/,
      github: /"gitHub"/,
      escape: /outside itself/,
      bomb: /alias/,
      unserved: /serves no Nothing in nowhere\.test\.io\/v1/,
    };
    const kyma = await suite.kcpKyma('k1');
    expect(kyma.status.state).to.equal('Error');
    for (const [name, message] of Object.entries(expected)) {
      const entry = kyma.status.modules.find((m: Json) => m.name === name);
      expect(entry.message, name).to.match(message);
    }
    // The ones whose descriptor was readable have a Manifest that says the same.
    const manifests = await suite.manifests();
    for (const name of ['big', 'damaged', 'escape', 'bomb', 'unserved']) {
      const manifest = manifests.find(
        (m) => m.metadata.labels['operator.kyma-project.io/module-name'] === name,
      );
      expect(manifest?.status?.state, name).to.equal('Error');
      expect(manifest?.status?.lastOperation?.operation, name).to.match(expected[name]!);
    }
    expect(
      manifests.map((m) => m.metadata.labels['operator.kyma-project.io/module-name']),
    ).to.not.include.members(['malformed', 'github']);
    const core = suite.planes.skr.makeApiClient(CoreV1Api);
    const configMap = (name: string) =>
      getOrUndefined(() => core.readNamespacedConfigMap({ name, namespace: 'kyma-system' }));
    expect(await configMap('good-config')).to.not.equal(undefined);
    // Of a set with an object the SKR cannot take, the rest is applied (and nothing pruned).
    expect(await configMap('unserved-config')).to.not.equal(undefined);

    // No hot loop: passes within the backoff ask the registry nothing, failed or not.
    const sent = { ...suite.state.installation!.source.requests() };
    for (let pass = 0; pass < 3; pass++)
      await suite.state.manager!.reconciler.reconcile(`${suite.state.ns}/k1`);
    expect(suite.state.installation!.source.requests()).to.deep.equal(sent);
    expect(
      (
        await suite.api().listNamespacedCustomObject({
          group: GROUP,
          version: KINDS.kyma.version,
          plural: KINDS.kyma.plural,
          namespace: suite.state.ns,
        })
      ).items,
    ).to.have.length(1);
  });

  it('pulls a repaired blob again once the backoff has passed', async function () {
    const blobs = await handModule('repaired', handTar([{ name: 'repaired.yaml', data: CONFIGMAP_YAML }]));
    const stored = suite.state.registry.blobPath(blobs['raw-manifest']!.digest);
    const original = handTar([{ name: 'repaired.yaml', data: CONFIGMAP_YAML }]);
    await writeFile(
      stored,
      handTar([{ name: 'repaired.yaml', data: CONFIGMAP_YAML.replace('hand', 'evil') }]),
    );
    await suite.kyma('k2', [{ name: 'repaired' }]);
    await suite.start({ retry: { transientMs: 200, permanentMs: 200, maxMs: 400 } });
    await suite.reconcileUntil(
      'k2',
      async () => (await suite.moduleStatus('k2', 'repaired'))?.state === 'Error',
      'Error while the blob is damaged',
    );
    await writeFile(stored, original);
    await suite.reconcileUntil(
      'k2',
      async () => (await suite.moduleStatus('k2', 'repaired'))?.state === 'Ready',
      'Ready once repaired',
    );
  });
});
