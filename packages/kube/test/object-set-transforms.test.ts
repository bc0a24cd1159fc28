// The transforms of the object-set engine are pure: each is checked on plain objects, including what must stay
// untouched (kinds, fields and inputs it must not change).
import { expect } from 'chai';
import {
  disclaimer,
  kymaComponent,
  localizeImages,
  managedByOwnedBy,
  MODULE_OBJECT_METADATA,
  parseImageReference,
  skrImagePullSecret,
  transformed,
  type SetMember,
} from '../src/index.js';

function deployment(kind = 'Deployment', name = 'operator'): SetMember {
  return {
    apiVersion: 'apps/v1',
    kind,
    metadata: { name, namespace: 'kyma-system', labels: { app: 'operator' } },
    spec: {
      template: {
        spec: {
          initContainers: [{ name: 'init', image: 'europe-docker.pkg.dev/kyma/prod/init:1.0.0' }],
          containers: [
            {
              name: 'manager',
              image: 'europe-docker.pkg.dev/kyma/prod/template-operator:1.0.5',
              env: [
                { name: 'SIDECAR_IMAGE', value: 'europe-docker.pkg.dev/kyma/prod/sidecar:2.1' },
                { name: 'LOG_LEVEL', value: 'info' },
                { name: 'FROM_SECRET', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } },
              ],
            },
          ],
        },
      },
    },
  };
}

const podSpec = (object: SetMember) =>
  (object['spec'] as { template: { spec: Record<string, unknown> } }).template.spec as {
    initContainers: { image: string }[];
    containers: { image: string; env?: { name: string; value?: string }[] }[];
    imagePullSecrets?: { name: string }[];
  };

describe('object-set transforms', function () {
  it('managed-by, owned-by, component, part-of and the disclaimer, on a copy', function () {
    const input = deployment();
    const output = transformed(input, [
      managedByOwnedBy({ namespace: 'kcp-system', name: 'kyma-1-template-operator-123' }),
      kymaComponent('kyma-1-template-operator-123'),
      disclaimer(),
    ]);
    expect(output.metadata.labels).to.deep.equal({
      app: 'operator',
      'operator.kyma-project.io/managed-by': 'kyma',
      'app.kubernetes.io/component': 'kyma-1-template-operator-123',
      'app.kubernetes.io/part-of': 'Kyma',
    });
    expect(output.metadata.annotations).to.deep.equal({
      'deprecated-operator.kyma-project.io/owned-by': 'kcp-system/kyma-1-template-operator-123',
      'operator.kyma-project.io/managed-by-reconciler-disclaimer': MODULE_OBJECT_METADATA.disclaimer,
    });
    expect(input.metadata.labels, 'the input was changed').to.deep.equal({ app: 'operator' });
    expect(input.metadata.annotations).to.equal(undefined);
  });

  it('localizes images by <last path segment>:<tag> in Deployments and StatefulSets, image and env values', function () {
    const localized = [
      'registry.example.com:5000/mirror/kyma/template-operator:1.0.5@sha256:' + 'a'.repeat(64),
      'registry.example.com/mirror/sidecar:2.1',
      'registry.example.com/mirror/init:1.0.0',
      'registry.example.com/mirror/unrelated:9.9',
    ];
    for (const kind of ['Deployment', 'StatefulSet']) {
      const output = transformed(deployment(kind), [localizeImages(localized)]);
      const spec = podSpec(output);
      expect(spec.containers[0]?.image).to.equal(localized[0]);
      expect(spec.initContainers[0]?.image).to.equal(localized[2]);
      expect(spec.containers[0]?.env).to.deep.equal([
        { name: 'SIDECAR_IMAGE', value: localized[1] },
        { name: 'LOG_LEVEL', value: 'info' },
        { name: 'FROM_SECRET', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } },
      ]);
    }
    // DaemonSets are not localized (upstream's rule), nor is a tag that differs.
    const daemonSet = transformed(deployment('DaemonSet'), [localizeImages(localized)]);
    expect(podSpec(daemonSet).containers[0]?.image).to.equal(
      'europe-docker.pkg.dev/kyma/prod/template-operator:1.0.5',
    );
    const otherTag = transformed(deployment(), [
      localizeImages(['registry.example.com/template-operator:1.0.6']),
    ]);
    expect(podSpec(otherTag).containers[0]?.image).to.equal(
      'europe-docker.pkg.dev/kyma/prod/template-operator:1.0.5',
    );
  });

  it('fails the object on a container image that is no image reference, and on a localized image without a tag', function () {
    const bad = deployment();
    podSpec(bad).containers[0]!.image = 'Not An Image!';
    expect(() => transformed(bad, [localizeImages(['registry.example.com/x:1'])])).to.throw(
      /not an image reference/,
    );
    expect(() => localizeImages(['registry.example.com/x'])).to.throw(/with a tag/);
  });

  it('parses image references by the distribution grammar', function () {
    expect(parseImageReference('nginx')).to.deep.include({ name: 'nginx', tag: undefined });
    expect(parseImageReference('localhost:5000/a/b:v1')).to.deep.include({
      repository: 'localhost:5000/a/b',
      name: 'b',
      tag: 'v1',
    });
    expect(parseImageReference('a/b@sha256:' + 'f'.repeat(64))).to.deep.include({
      name: 'b',
      tag: undefined,
    });
    expect(parseImageReference('UPPER/case:1')).to.equal(undefined);
    expect(parseImageReference('')).to.equal(undefined);
  });

  it('adds the SKR image pull secret to every workload and its env to the manager only', function () {
    const manager = transformed(deployment('Deployment', 'operator'), [
      skrImagePullSecret('skr-pull', { kind: 'Deployment', name: 'operator' }),
    ]);
    expect(podSpec(manager).imagePullSecrets).to.deep.equal([{ name: 'skr-pull' }]);
    expect(podSpec(manager).containers[0]?.env?.at(-1)).to.deep.equal({
      name: 'SKR_IMG_PULL_SECRET',
      value: 'skr-pull',
    });
    const other = transformed(deployment('StatefulSet', 'db'), [
      skrImagePullSecret('skr-pull', { kind: 'Deployment', name: 'operator' }),
    ]);
    expect(podSpec(other).imagePullSecrets).to.deep.equal([{ name: 'skr-pull' }]);
    expect(podSpec(other).containers[0]?.env?.map((e) => e.name)).to.not.include('SKR_IMG_PULL_SECRET');
    // Without a manager every workload is one; the variable set twice is an error.
    const everyWorkload = transformed(deployment('StatefulSet', 'db'), [skrImagePullSecret('skr-pull')]);
    expect(podSpec(everyWorkload).containers[0]?.env?.at(-1)?.name).to.equal('SKR_IMG_PULL_SECRET');
    expect(() => transformed(everyWorkload, [skrImagePullSecret('skr-pull')])).to.throw(
      /already sets SKR_IMG_PULL_SECRET/,
    );
    // A ConfigMap is left alone.
    const configMap: SetMember = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'c' },
      data: { a: '1' },
    };
    expect(transformed(configMap, [skrImagePullSecret('skr-pull')])).to.deep.equal(configMap);
  });
});
