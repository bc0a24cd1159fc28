// fast-check arbitraries of the objects a CRD's OpenAPI v3 schema admits: types, enums, patterns, lengths,
// minimums, formats, required fields, list-map keys, embedded resources and preserved unknown fields. CEL rules are
// not evaluated: a caller that has one passes `fix` to bring each value inside it.
import fc from 'fast-check';

type Json = Record<string, unknown>;
type Schema = Record<string, unknown>;

const DNS_LABEL = fc.stringMatching(/^[a-z]([-a-z0-9]{0,10}[a-z0-9])?$/);

/** Small values a preserved-unknown object may hold beside its declared fields. */
const EXTRA_VALUE = fc.oneof(
  fc.string({ maxLength: 8 }),
  fc.integer({ min: -1000, max: 1000 }),
  fc.boolean(),
  fc.dictionary(fc.stringMatching(/^[a-z]{1,6}$/), fc.string({ maxLength: 6 }), { maxKeys: 2 }),
);

function stringArbitrary(schema: Schema): fc.Arbitrary<string> {
  const minLength = (schema['minLength'] as number | undefined) ?? 0;
  // Kubernetes' own limits are large (32 kB messages); short strings find the same disagreements faster.
  const maxLength = Math.min((schema['maxLength'] as number | undefined) ?? 24, 24);
  const limit = (schema['maxLength'] as number | undefined) ?? Infinity;
  const fits = (value: string) => value.length >= minLength && value.length <= limit;
  if (typeof schema['pattern'] === 'string') {
    const pattern = new RegExp(schema['pattern']);
    const matching = fc.stringMatching(pattern, { size: 'small' }).filter(fits);
    if (!pattern.test('') || !fits('')) return matching;
    // Patterns that allow '' draw it often; most real values are not empty.
    return fc.oneof(
      { arbitrary: matching.filter((value) => value !== ''), weight: 4 },
      { arbitrary: fc.constant(''), weight: 1 },
    );
  }
  switch (schema['format']) {
    case 'date-time':
      return fc
        .date({
          min: new Date('2000-01-01T00:00:00Z'),
          max: new Date('2099-12-31T23:59:59Z'),
          noInvalidDate: true,
        })
        .map((date) => date.toISOString().replace(/\.\d{3}Z$/, 'Z'));
    case 'uri':
      // fc.webUrl is slow to draw (about 18 ms each here); the API server checks only that it parses as a URI.
      return fc.tuple(DNS_LABEL, DNS_LABEL).map(([host, path]) => `https://${host}.example/${path}`);
    default:
      return fc.string({ minLength, maxLength: Math.max(minLength, maxLength) });
  }
}

function objectArbitrary(schema: Schema): fc.Arbitrary<Json> {
  if (schema['x-kubernetes-embedded-resource'] === true) {
    // Any Kubernetes object: the API server checks apiVersion, kind and metadata; the rest is kept as written.
    return fc.record(
      {
        apiVersion: fc.constantFrom('v1', 'operator.kyma-project.io/v1alpha1', 'example.io/v1beta1'),
        kind: fc.constantFrom('Sample', 'ConfigMap', 'Thing'),
        metadata: fc.record({ name: DNS_LABEL, namespace: DNS_LABEL }, { requiredKeys: ['name'] }),
        spec: fc.dictionary(fc.stringMatching(/^[a-z]{1,6}$/), EXTRA_VALUE, { maxKeys: 3 }),
      },
      { requiredKeys: ['apiVersion', 'kind', 'metadata'] },
    );
  }
  const properties = (schema['properties'] as Record<string, Schema> | undefined) ?? {};
  const required = (schema['required'] as string[] | undefined) ?? [];
  const additional = schema['additionalProperties'] as Schema | undefined;
  if (Object.keys(properties).length === 0 && additional) {
    return fc.dictionary(fc.stringMatching(/^[a-z][-a-z0-9./]{0,12}$/), arbitraryOf(additional), {
      maxKeys: 3,
    });
  }
  const declared = fc.record(
    Object.fromEntries(Object.entries(properties).map(([key, child]) => [key, arbitraryOf(child)])),
    { requiredKeys: required },
  ) as fc.Arbitrary<Json>;
  if (schema['x-kubernetes-preserve-unknown-fields'] !== true) return declared;
  const extras = fc.dictionary(fc.stringMatching(/^x[a-z]{1,6}$/), EXTRA_VALUE, { maxKeys: 2 });
  return fc.tuple(declared, extras).map(([known, unknown]) => ({ ...unknown, ...known }));
}

function arrayArbitrary(schema: Schema): fc.Arbitrary<unknown[]> {
  const items = arbitraryOf(schema['items'] as Schema);
  const keys = schema['x-kubernetes-list-map-keys'] as string[] | undefined;
  if (schema['x-kubernetes-list-type'] === 'map' && keys) {
    return fc.uniqueArray(items, {
      maxLength: 3,
      selector: (item) => keys.map((key) => JSON.stringify((item as Json)[key])).join('\0'),
    });
  }
  return fc.array(items, { maxLength: 3 });
}

/** Values the OpenAPI v3 schema `schema` (one node of a CRD's openAPIV3Schema) admits. */
export function arbitraryOf(schema: Schema): fc.Arbitrary<unknown> {
  if (Array.isArray(schema['enum'])) return fc.constantFrom(...(schema['enum'] as unknown[]));
  switch (schema['type']) {
    case 'object':
      return objectArbitrary(schema);
    case 'array':
      return arrayArbitrary(schema);
    case 'string':
      return stringArbitrary(schema);
    case 'integer':
      return fc.integer({ min: (schema['minimum'] as number | undefined) ?? -1_000_000, max: 2_000_000_000 });
    case 'number':
      return fc.double({ min: -1e6, max: 1e6, noNaN: true, noDefaultInfinity: true });
    case 'boolean':
      return fc.boolean();
    default:
      throw new Error(`no arbitrary for schema type ${String(schema['type'])}`);
  }
}
