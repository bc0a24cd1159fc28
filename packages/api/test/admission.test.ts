import { expect } from 'chai';
import { ADMISSION_ALLOWED_MESSAGE, allowedResponse, parseAdmissionReview } from '../src/index.js';

const review = {
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  request: {
    uid: 'u-1',
    kind: { group: 'operator.kyma-project.io', version: 'v1beta2', kind: 'Kyma' },
    resource: { group: 'operator.kyma-project.io', version: 'v1beta2', resource: 'kymas' },
    name: 'default',
    namespace: 'kyma-system',
    operation: 'CREATE',
    userInfo: { username: 'alice', groups: ['system:authenticated'] },
    object: {
      apiVersion: 'operator.kyma-project.io/v1beta2',
      kind: 'Kyma',
      metadata: { name: 'default' },
      spec: {},
    },
    oldObject: null,
  },
};

describe('AdmissionReview contract', () => {
  it('accepts a v1 review and keeps the embedded objects whole', () => {
    const result = parseAdmissionReview(review);
    expect(result.ok).to.equal(true);
    if (result.ok) expect(result.value.request.object).to.deep.equal(review.request.object);
  });

  it('accepts a v1beta1 review (same request fields) and answers it in v1beta1', () => {
    const result = parseAdmissionReview({ ...review, apiVersion: 'admission.k8s.io/v1beta1' });
    expect(result.ok).to.equal(true);
    if (!result.ok) return;
    expect(result.value.apiVersion).to.equal('admission.k8s.io/v1beta1');
    expect(JSON.parse(allowedResponse('u-1', result.value.apiVersion))).to.deep.equal({
      apiVersion: 'admission.k8s.io/v1beta1',
      kind: 'AdmissionReview',
      response: { uid: 'u-1', allowed: true, result: { message: ADMISSION_ALLOWED_MESSAGE } },
    });
  });

  it('rejects another admission version, a missing uid and an unknown operation, naming the field', () => {
    const cases: [unknown, RegExp][] = [
      [{ ...review, apiVersion: 'admission.k8s.io/v2' }, /apiVersion/],
      [{ ...review, request: { ...review.request, uid: undefined } }, /request\.uid/],
      [{ ...review, request: { ...review.request, operation: 'PATCH' } }, /request\.operation/],
      [{ ...review, request: undefined }, /request/],
    ];
    for (const [body, field] of cases) {
      const result = parseAdmissionReview(body);
      expect(result.ok).to.equal(false);
      if (!result.ok) expect(result.error).to.match(field);
    }
  });

  it('answers allowed with the uid in the same apiVersion', () => {
    expect(JSON.parse(allowedResponse('u-1'))).to.deep.equal({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: { uid: 'u-1', allowed: true, result: { message: ADMISSION_ALLOWED_MESSAGE } },
    });
  });
});
