// The objects the CRD agreement test draws from each generated CRD (test/integration/crd-agreement.test.ts), shared
// with the Go types' round-trip test, which reads them from api/go/testdata/crd-samples.json. Rewrite that file after
// a schema change with `node --import tsx --conditions=source test/support/crd-samples.ts`.
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { CRDS, type CustomResourceSource } from '@skr-watcher/api';
import fc from 'fast-check';
import { customResourceDefinition } from '../../packages/api/scripts/generate-crds.js';
import { arbitraryOf } from './openapi-arbitrary.js';

type Json = Record<string, unknown>;

/** Objects drawn per kind, and the seed, unless the environment says otherwise. */
export const SAMPLE_RUNS = 200;
export const SAMPLE_SEED = 28;

export const CRD_SAMPLES_FILE = fileURLToPath(
  new URL('../../api/go/testdata/crd-samples.json', import.meta.url),
);

/** CEL rules of the CRDs, which the arbitraries do not evaluate: brings a drawn spec inside them. */
const INSIDE_RULES: Record<string, (spec: Json) => Json> = {
  // Exactly one of channels and mandatory.
  ModuleReleaseMeta: (spec) => {
    if ('channels' in spec && 'mandatory' in spec) {
      const { mandatory: _mandatory, ...rest } = spec;
      return rest;
    }
    if (!('channels' in spec) && !('mandatory' in spec)) return { ...spec, channels: [] };
    return spec;
  },
};

export interface Drawn {
  spec: Json;
  status?: Json;
}

/** `runs` specs (and statuses, for kinds with one) drawn from the kind's generated CRD, the same for one seed. */
export function drawnObjects(source: CustomResourceSource, runs: number, seed: number): Drawn[] {
  const crd = customResourceDefinition(source) as {
    spec: { versions: { schema: { openAPIV3Schema: { properties: Record<string, Json> } } }[] };
  };
  const properties = crd.spec.versions[0]!.schema.openAPIV3Schema.properties;
  const fix = INSIDE_RULES[source.kind] ?? ((spec: Json) => spec);
  const drawn = fc.record(
    {
      spec: (arbitraryOf(properties['spec']!) as fc.Arbitrary<Json>).map(fix),
      ...(properties['status'] ? { status: arbitraryOf(properties['status']) as fc.Arbitrary<Json> } : {}),
    },
    // The API server does not require a spec (nor do upstream's CRDs); the agent reads no object without one.
    { requiredKeys: ['spec'] },
  ) as fc.Arbitrary<Drawn>;
  return fc.sample(drawn, { numRuns: runs, seed: seed + source.kind.length });
}

/** The fixture's text: per kind, the drawn objects as whole objects, one per line. */
export function crdSamplesText(): string {
  const kinds = CRDS.map((source) => {
    const objects = drawnObjects(source, SAMPLE_RUNS, SAMPLE_SEED).map((drawn, index) =>
      JSON.stringify({
        apiVersion: `${source.group}/${source.version}`,
        kind: source.kind,
        metadata: { name: `${source.plural}-${index}`, namespace: 'default' },
        ...drawn,
      }),
    );
    return `${JSON.stringify(source.kind)}: [\n${objects.join(',\n')}\n]`;
  });
  return `{\n${kinds.join(',\n')}\n}\n`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await writeFile(CRD_SAMPLES_FILE, crdSamplesText());
  console.log(`wrote ${CRD_SAMPLES_FILE}`);
}
