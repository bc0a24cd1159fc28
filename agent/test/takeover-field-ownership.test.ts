// The managed-fields rewrite behind a takeover (decision 028): which entries leave, where their fields go.
import { expect } from 'chai';
import {
  transferredEntries,
  unionOfFields,
  type ManagedFieldsEntry,
} from '../src/takeover/field-ownership.js';

const UPSTREAM = 'declarative.kyma-project.io/applier';
const AGENT = 'skr-watcher-modules';

const entry = (
  manager: string,
  fieldsV1: ManagedFieldsEntry['fieldsV1'],
  extra: Partial<ManagedFieldsEntry> = {},
) =>
  ({
    manager,
    operation: 'Apply',
    apiVersion: 'v1',
    fieldsType: 'FieldsV1',
    time: '2026-08-01T10:00:00Z',
    fieldsV1,
    ...extra,
  }) as ManagedFieldsEntry;

describe('takeover: moving managed fields between field managers', () => {
  it('answers undefined when no entry of the leaving managers is there', () => {
    expect(
      transferredEntries([entry(AGENT, { 'f:data': {} }), entry('kubectl', {})], [UPSTREAM], AGENT),
    ).to.equal(undefined);
  });

  it("renames the leaving manager's entry when the new manager has none, as an Apply entry", () => {
    const fields = { 'f:data': { 'f:a': {} }, 'f:metadata': { 'f:labels': { 'f:x': {} } } };
    const next = transferredEntries(
      [entry(UPSTREAM, fields), entry('kube-controller-manager', {}, { operation: 'Update' })],
      [UPSTREAM],
      AGENT,
    );
    expect(next?.map((e) => [e.manager, e.operation])).to.deep.equal([
      ['kube-controller-manager', 'Update'],
      [AGENT, 'Apply'],
    ]);
    expect(next?.[1]?.fieldsV1).to.deep.equal(fields);
  });

  it("merges the leaving manager's fields into the new manager's Apply entry of the same subresource only", () => {
    const next = transferredEntries(
      [
        entry(AGENT, { 'f:data': { 'f:a': {} } }),
        entry(UPSTREAM, { 'f:data': { 'f:b': {} }, 'f:metadata': { 'f:finalizers': { 'v:"x"': {} } } }),
        entry(UPSTREAM, { 'f:status': { 'f:state': {} } }, { subresource: 'status' }),
        entry(UPSTREAM, { 'f:data': { 'f:c': {} } }, { operation: 'Update' }),
      ],
      [UPSTREAM],
      AGENT,
    );
    expect(next).to.have.length(2);
    expect(next?.[0]?.fieldsV1).to.deep.equal({
      'f:data': { 'f:a': {}, 'f:b': {}, 'f:c': {} },
      'f:metadata': { 'f:finalizers': { 'v:"x"': {} } },
    });
    expect(next?.[1]).to.deep.include({ manager: AGENT, operation: 'Apply', subresource: 'status' });
  });

  it('unites field sets without changing either', () => {
    const a = { 'f:spec': { 'f:x': {} } };
    const b = { 'f:spec': { 'f:y': {} }, 'f:metadata': {} };
    expect(unionOfFields(a, b)).to.deep.equal({ 'f:spec': { 'f:x': {}, 'f:y': {} }, 'f:metadata': {} });
    expect(a).to.deep.equal({ 'f:spec': { 'f:x': {} } });
  });
});
