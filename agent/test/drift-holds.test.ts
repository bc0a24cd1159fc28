// What the targeted drift revert counts as drift: the SKR's object against what the module sets (drift.ts holds).
import { expect } from 'chai';
import { holds } from '../src/targeted/drift.js';

describe('drift: the SKR object holds what the module sets', () => {
  const wanted = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'op', labels: { 'operator.kyma-project.io/managed-by': 'kyma' } },
    spec: { replicas: 1, template: { spec: { containers: [{ name: 'op', image: 'op:1' }] } } },
  };
  const live = {
    ...wanted,
    metadata: {
      ...wanted.metadata,
      uid: 'u',
      resourceVersion: '9',
      annotations: { 'deployment.kubernetes.io/revision': '2' },
    },
    spec: {
      replicas: 1,
      strategy: { type: 'RollingUpdate' },
      template: { spec: { containers: [{ name: 'op', image: 'op:1', imagePullPolicy: 'IfNotPresent' }] } },
    },
    status: { replicas: 1 },
  };

  it('defaults, status and fields the module does not set are no drift', () => {
    expect(holds(live, wanted)).to.equal(true);
    // `data: {}` reads back as nothing (omitempty).
    expect(holds({ kind: 'ConfigMap' }, { kind: 'ConfigMap', data: {} })).to.equal(true);
  });

  it('a changed value, a removed label, a removed or added list element are drift', () => {
    expect(holds({ ...live, spec: { ...live.spec, replicas: 3 } }, wanted)).to.equal(false);
    expect(holds({ ...live, metadata: { ...live.metadata, labels: {} } }, wanted)).to.equal(false);
    const containers = (list: unknown[]) => ({
      ...live,
      spec: { ...live.spec, template: { spec: { containers: list } } },
    });
    expect(holds(containers([]), wanted)).to.equal(false);
    expect(holds(containers([{ name: 'op', image: 'op:1' }, { name: 'x' }]), wanted)).to.equal(false);
  });

  it('compares objects nested 20,000 levels deep without overflowing the stack', () => {
    const deep = (leaf: string) => {
      let value: unknown = leaf;
      for (let i = 0; i < 20_000; i++) value = { x: value };
      return value;
    };
    expect(holds(deep('a'), deep('a'))).to.equal(true);
    expect(holds(deep('a'), deep('b'))).to.equal(false);
  });
});
