import { expect } from 'chai';
import {
  kymaSchema,
  LABELS,
  managerOf,
  moduleReleaseMetaSchema,
  parseShape,
  selectsLabels,
  ShapeError,
  trackedObject,
} from '../src/index.js';

const kyma = (spec: unknown, status?: unknown) => ({
  apiVersion: 'operator.kyma-project.io/v1beta2',
  kind: 'Kyma',
  metadata: { name: 'k', namespace: 'kcp-system', labels: null },
  spec,
  ...(status === undefined ? {} : { status }),
});

describe('resource schemas', () => {
  it('name the first bad field of an object in the error', () => {
    expect(() => parseShape(kymaSchema, kyma({ modules: [{ channel: 'fast' }] }), 'Kyma kcp-system/k'))
      .to.throw(ShapeError)
      .with.property('message')
      .that.matches(/^Kyma kcp-system\/k spec\.modules\[0\]\.name: /);
    expect(() =>
      parseShape(kymaSchema, kyma({ modules: [{ name: 'a', customResourcePolicy: 'Sometimes' }] }), 'Kyma k'),
    ).to.throw(/spec\.modules\[0\]\.customResourcePolicy/);
  });

  it('read a status of an older or foreign shape as absent, and upstream tracking objects as given', () => {
    const old = parseShape(kymaSchema, kyma({}, { state: 'Bogus', modules: 'nope' }), 'Kyma k');
    expect(old.status).to.equal(undefined);
    const legacy = parseShape(
      kymaSchema,
      kyma({}, { state: 'Ready', modules: [{ name: 'm', state: 'Ready', template: 'm-1.0.0' }] }),
      'Kyma k',
    );
    expect(legacy.status?.modules?.[0]).to.deep.include({ name: 'm', state: 'Ready', template: undefined });
    const upstream = parseShape(
      kymaSchema,
      kyma(
        { channel: 'regular' },
        {
          state: 'Ready',
          modules: [
            {
              name: 'm',
              state: 'Unmanaged',
              resource: {
                apiVersion: 'x.io/v1',
                kind: 'M',
                metadata: { name: 'm', namespace: 'kyma-system' },
              },
            },
          ],
        },
      ),
      'Kyma k',
    );
    expect(trackedObject(upstream.status?.modules?.[0]?.resource)).to.deep.equal({
      apiVersion: 'x.io/v1',
      kind: 'M',
      name: 'm',
      namespace: 'kyma-system',
    });
  });

  it('read a mandatory ModuleReleaseMeta and a restricted one', () => {
    const meta = parseShape(
      moduleReleaseMetaSchema,
      {
        apiVersion: 'operator.kyma-project.io/v1beta2',
        kind: 'ModuleReleaseMeta',
        metadata: { name: 'istio' },
        spec: {
          moduleName: 'istio',
          mandatory: { version: '1.2.3' },
          kymaSelector: { matchLabels: { a: 'b' } },
        },
      },
      'mrm',
    );
    expect(meta.spec.mandatory?.version).to.equal('1.2.3');
    expect(meta.spec.kymaSelector?.matchLabels).to.deep.equal({ a: 'b' });
  });
});

describe('selectsLabels', () => {
  it('ANDs matchLabels and every expression operator', () => {
    const selector = {
      matchLabels: { region: 'eu' },
      matchExpressions: [
        { key: 'account', operator: 'In' as const, values: ['gold', 'silver'] },
        { key: 'blocked', operator: 'DoesNotExist' as const },
        { key: 'plan', operator: 'Exists' as const },
        { key: 'tier', operator: 'NotIn' as const, values: ['free'] },
      ],
    };
    expect(selectsLabels(selector, { region: 'eu', account: 'gold', plan: 'x' })).to.equal(true);
    expect(selectsLabels(selector, { region: 'eu', account: 'gold', plan: 'x', tier: 'free' })).to.equal(
      false,
    );
    expect(selectsLabels(selector, { region: 'us', account: 'gold', plan: 'x' })).to.equal(false);
    expect(selectsLabels(selector, { region: 'eu', account: 'bronze', plan: 'x' })).to.equal(false);
    expect(selectsLabels(selector, { region: 'eu', account: 'gold' })).to.equal(false);
    expect(selectsLabels(selector, { region: 'eu', account: 'gold', plan: 'x', blocked: '' })).to.equal(
      false,
    );
  });

  it('selects nothing with an empty selector (a restricted module stays closed)', () => {
    expect(selectsLabels({}, { any: 'thing' })).to.equal(false);
    expect(selectsLabels({ matchLabels: {} }, undefined)).to.equal(false);
  });
});

describe('managerOf', () => {
  const watcher = (manager: string | undefined, labels?: Record<string, string>) => ({
    metadata: { name: 'w', ...(labels ? { labels } : {}) },
    spec: {
      ...(manager ? { manager } : {}),
      resourceToWatch: { group: 'g', version: 'v', resource: 'r' },
      field: 'spec' as const,
    },
  });
  it('takes spec.manager, else the managed-by label, else lifecycle-manager', () => {
    expect(managerOf(watcher('mine', { [LABELS.managedBy]: 'label' }))).to.equal('mine');
    expect(managerOf(watcher(undefined, { [LABELS.managedBy]: 'label' }))).to.equal('label');
    expect(managerOf(watcher(undefined))).to.equal('lifecycle-manager');
  });
});
