import { expect } from 'chai';
import { ANNOTATIONS, type AdmissionReview } from '@skr-watcher/api';
import { isRelevantChange } from '../src/admission.js';

function update(oldProbe: string | undefined, newProbe: string | undefined): AdmissionReview {
  const object = (probe: string | undefined, rv: string) => ({
    apiVersion: 'operator.kyma-project.io/v1beta2',
    kind: 'Kyma',
    metadata: {
      name: 'default',
      namespace: 'kyma-system',
      resourceVersion: rv,
      ...(probe ? { annotations: { [ANNOTATIONS.watcherProbe]: probe } } : {}),
    },
    spec: { channel: 'regular' },
  });
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'probe-1',
      kind: { group: 'operator.kyma-project.io', version: 'v1beta2', kind: 'Kyma' },
      resource: { group: 'operator.kyma-project.io', version: 'v1beta2', resource: 'kymas' },
      operation: 'UPDATE',
      object: object(newProbe, '2'),
      oldObject: object(oldProbe, '1'),
    },
  };
}

describe('watcher probe (broken-watcher detection)', () => {
  it('a new or changed probe annotation is relevant even though the spec is unchanged', () => {
    expect(isRelevantChange(update(undefined, '2026-11-22T00:00:00.000Z'))?.watched).to.deep.equal({
      Namespace: 'kyma-system',
      Name: 'default',
    });
    expect(isRelevantChange(update('2026-11-22T00:00:00.000Z', '2026-11-22T00:05:00.000Z'))).to.not.equal(
      undefined,
    );
  });

  it('an unchanged probe annotation with an unchanged spec is still a no-op', () => {
    expect(isRelevantChange(update('2026-11-22T00:00:00.000Z', '2026-11-22T00:00:00.000Z'))).to.equal(
      undefined,
    );
  });
});
