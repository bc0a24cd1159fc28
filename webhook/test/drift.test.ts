// Drift of installed module objects: which writes of objects labelled managed-by: kyma wake KCP.
import { expect } from 'chai';
import fc from 'fast-check';
import { DRIFT, parseAdmissionReview, type AdmissionReview } from '@skr-watcher/api';
import { isRelevantChange } from '../src/admission.js';
import { driftVerdict, type DriftVerdict } from '../src/drift.js';

const INSTALLED = { 'operator.kyma-project.io/managed-by': 'kyma' };

function configMap(data: Record<string, string>, metadata: Record<string, unknown> = {}) {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: 'greeter-config',
      namespace: 'kyma-system',
      uid: 'u-1',
      resourceVersion: '10',
      labels: INSTALLED,
      ...metadata,
    },
    data,
  };
}

function review(request: Record<string, unknown>): AdmissionReview {
  const parsed = parseAdmissionReview({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'drift-1',
      kind: { group: '', version: 'v1', kind: 'ConfigMap' },
      resource: { group: '', version: 'v1', resource: 'configmaps' },
      name: 'greeter-config',
      namespace: 'kyma-system',
      operation: 'UPDATE',
      ...request,
    },
  });
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
}

const update = (oldObject: unknown, object: unknown, options: unknown = { fieldManager: 'kubectl-edit' }) =>
  review({ oldObject, object, options });

function verdictOf(subject: AdmissionReview): { verdict?: DriftVerdict; event: unknown } {
  let verdict: DriftVerdict | undefined;
  const event = isRelevantChange(subject, (v) => (verdict = v));
  return { verdict, event };
}

describe('drift of installed objects (webhook)', () => {
  it('the SKR Kyma, labelled managed-by: kyma as upstream labels it, follows the Watcher rules, not drift', () => {
    const kyma = (state: string) => ({
      apiVersion: 'operator.kyma-project.io/v1beta2',
      kind: 'Kyma',
      metadata: {
        name: 'default',
        namespace: 'kyma-system',
        uid: 'k-1',
        resourceVersion: '7',
        labels: INSTALLED,
      },
      spec: { channel: 'regular' },
      status: { state },
    });
    const kymaReview = (options: unknown) =>
      review({
        kind: { group: 'operator.kyma-project.io', version: 'v1beta2', kind: 'Kyma' },
        resource: { group: 'operator.kyma-project.io', version: 'v1beta2', resource: 'kymas' },
        subResource: 'status',
        name: 'default',
        oldObject: kyma('Processing'),
        object: kyma('Ready'),
        options,
      });
    // A status write under the agent's own field manager reaches a Watcher of Kymas' status as before.
    const { verdict, event } = verdictOf(kymaReview({ fieldManager: DRIFT.agentFieldManagers[0] }));
    expect(verdict).to.equal(undefined);
    expect(event).to.deep.include({ watched: { Namespace: 'kyma-system', Name: 'default' } });
  });

  it("a user's edit of an installed ConfigMap is drift and names the object on the wire as upstream does", () => {
    const { verdict, event } = verdictOf(update(configMap({ a: '1' }), configMap({ a: '2' })));
    expect(verdict).to.equal('drift');
    expect(event).to.deep.include({
      watched: { Namespace: 'kyma-system', Name: 'greeter-config' },
      watchedGvk: { group: '', version: 'v1', kind: 'ConfigMap' },
      uid: 'u-1',
      previousResourceVersion: '10',
    });
  });

  it("the agent's own applies wake nothing, whatever they change", () => {
    for (const fieldManager of DRIFT.agentFieldManagers) {
      const { verdict, event } = verdictOf(
        update(configMap({ a: '2' }), configMap({ a: '1' }), { kind: 'UpdateOptions', fieldManager }),
      );
      expect(verdict).to.equal('own-write');
      expect(event).to.equal(undefined);
    }
  });

  it('a deletion is drift (delete options carry no field manager)', () => {
    const { verdict, event } = verdictOf(
      review({
        operation: 'DELETE',
        kind: { group: 'apps', version: 'v1', kind: 'Deployment' },
        resource: { group: 'apps', version: 'v1', resource: 'deployments' },
        name: 'greeter-operator',
        oldObject: {
          apiVersion: 'apps/v1',
          kind: 'Deployment',
          metadata: { name: 'greeter-operator', namespace: 'kyma-system', labels: INSTALLED, uid: 'd-1' },
        },
        options: { kind: 'DeleteOptions', propagationPolicy: 'Background' },
      }),
    );
    expect(verdict).to.equal('drift');
    expect(event).to.deep.include({ watched: { Namespace: 'kyma-system', Name: 'greeter-operator' } });
  });

  it('status, volatile metadata and annotations controllers churn are no drift', () => {
    const before = configMap({ a: '1' }, { generation: 1, annotations: { keep: 'x' } });
    const churned = {
      ...configMap(
        { a: '1' },
        {
          generation: 2,
          resourceVersion: '11',
          managedFields: [{ manager: 'kube-controller-manager' }],
          annotations: {
            keep: 'x',
            'deployment.kubernetes.io/revision': '3',
            'kubectl.kubernetes.io/last-applied-configuration': '{}',
          },
        },
      ),
      status: { replicas: 1 },
    };
    expect(verdictOf(update(before, churned)).verdict).to.equal('churn');
    expect(verdictOf(update(before, churned)).event).to.equal(undefined);
    // Any status subresource write is a controller's.
    expect(verdictOf(review({ oldObject: before, object: before, subResource: 'status' })).verdict).to.equal(
      'churn',
    );
    // An annotation the module set (or a user added) does count.
    const annotated = configMap({ a: '1' }, { generation: 1, annotations: { keep: 'y' } });
    expect(verdictOf(update(before, annotated)).verdict).to.equal('drift');
  });

  it('removing the managed-by label is drift (the selector matches the old object)', () => {
    const { verdict } = verdictOf(update(configMap({ a: '1' }), configMap({ a: '1' }, { labels: {} })));
    expect(verdict).to.equal('drift');
  });

  it('objects without the label keep the Module CR rules (no drift verdict)', () => {
    const plain = (data: Record<string, string>) => ({ ...configMap(data, { labels: { other: 'x' } }) });
    const { verdict, event } = verdictOf(update(plain({ a: '1' }), plain({ a: '2' })));
    expect(verdict).to.equal(undefined);
    expect(event).to.not.equal(undefined);
  });

  it('hostile bodies (labels, annotations and options of any type) get a verdict, never an exception', () => {
    fc.assert(
      fc.property(fc.anything(), fc.anything(), fc.anything(), (labels, annotations, options) => {
        const object = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', labels, annotations } };
        const old = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', labels: INSTALLED } };
        const parsed = review({ oldObject: old, object, options });
        expect(['drift', 'own-write', 'churn']).to.include(driftVerdict(parsed.request));
      }),
      { numRuns: 300 },
    );
  });
});
