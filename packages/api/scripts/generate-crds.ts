// `npm run generate`: writes manifests/crds/<plural>.yaml for every kind in CRDS from its zod schemas
// (docs/decisions/018), and the Go types of the same kinds to api/go (generate-go.ts). `--check` writes nothing and exits 1 when a committed file differs from what it would write.
// zod gives the structure (types, required fields, enums, lists, maps); facts registered in `crd` give what only the
// API server checks. zod's own string and number checks are the agent's and are left out.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as prettier from 'prettier';
import { stringify } from 'yaml';
import * as z from 'zod/mini';
import { CRDS, crd, type CustomResourceSource, type OpenApiSchema, type OpenApiValue } from '../src/index.js';

export const CRD_DIR = fileURLToPath(new URL('../../../manifests/crds/', import.meta.url));

/** Where the facts of a node wait between zod's pass and ours (zod copies them onto wrappers such as optional). */
const FACTS = 'x-skr-watcher-facts';

/** Keywords zod derives from its own checks (`.min(1)`, `.int()`, `.default()`): the agent's, never the server's. */
const AGENT_ONLY = new Set([
  '$schema',
  'minLength',
  'maxLength',
  'pattern',
  'format',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'default',
  'propertyNames',
  'description',
]);

/** Key order of a generated node: what it is first, then its constraints, then its children. */
const ORDER = [
  'type',
  'description',
  'format',
  'enum',
  'default',
  'pattern',
  'minLength',
  'maxLength',
  'minimum',
  'maximum',
  'required',
];

function isSchema(value: unknown): value is OpenApiSchema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function sorted(node: OpenApiSchema): OpenApiSchema {
  const rank = (key: string) => {
    const index = ORDER.indexOf(key);
    if (index >= 0) return index;
    if (key.startsWith('x-')) return ORDER.length;
    return ORDER.length + 1; // properties, items, additionalProperties
  };
  return Object.fromEntries(Object.entries(node).sort(([a], [b]) => rank(a) - rank(b)));
}

/** The string values an enum-like node allows (`enum`, or `const`), or undefined for any other node. */
function enumValues(node: OpenApiSchema): OpenApiValue[] | undefined {
  if (Array.isArray(node['enum'])) return node['enum'];
  if ('const' in node) return [node['const'] as OpenApiValue];
  return undefined;
}

/** One node of zod's JSON Schema (draft 2020-12) as a structural OpenAPI v3 schema for a CRD. */
function structural(node: OpenApiSchema, path: string): OpenApiSchema {
  const facts = isSchema(node[FACTS]) ? node[FACTS] : {};
  if (isSchema(facts['served'])) return sorted(facts['served']);
  const out: OpenApiSchema = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === FACTS || AGENT_ONLY.has(key)) continue;
    out[key] = value;
  }
  if (Array.isArray(out['anyOf'])) {
    // A union of enums and literals (a state or ''): one string enum, as upstream's CRDs write it.
    const alternatives = out['anyOf'].map((alternative, i) =>
      structural(alternative as OpenApiSchema, `${path}.anyOf[${i}]`),
    );
    const values = alternatives.map(enumValues);
    if (values.some((value) => value === undefined) || alternatives.some((a) => a['type'] !== 'string')) {
      throw new Error(
        `${path}: a union other than of string enums has no structural CRD schema; register one in crd`,
      );
    }
    delete out['anyOf'];
    out['type'] = 'string';
    out['enum'] = [...new Set(values.flat() as OpenApiValue[])];
  }
  if ('const' in out) {
    out['enum'] = [out['const'] as OpenApiValue];
    delete out['const'];
  }
  if (isSchema(out['properties'])) {
    out['properties'] = Object.fromEntries(
      Object.entries(out['properties']).map(([key, child]) => [
        key,
        structural(child as OpenApiSchema, `${path}.${key}`),
      ]),
    );
    if ('additionalProperties' in out) {
      // z.object: false (unknown fields dropped when parsed); z.looseObject: {} (kept), as the API server does
      // only when told so.
      if (isSchema(out['additionalProperties'])) out['x-kubernetes-preserve-unknown-fields'] = true;
      delete out['additionalProperties'];
    }
  } else if ('additionalProperties' in out) {
    // z.record: a map of strings (labels) or of anything (a Module CR's spec, a descriptor).
    const values = out['additionalProperties'];
    if (isSchema(values) && Object.keys(values).length > 0) {
      out['additionalProperties'] = structural(values, `${path}.*`);
    } else {
      delete out['additionalProperties'];
      out['x-kubernetes-preserve-unknown-fields'] = true;
    }
  }
  if (isSchema(out['items'])) out['items'] = structural(out['items'], `${path}[]`);
  const { served: _served, ...keywords } = facts;
  const merged = { ...out, ...keywords };
  if (merged['type'] === undefined) {
    throw new Error(
      `${path}: no type (z.unknown or z.any); register what the API server should check in crd`,
    );
  }
  return sorted(merged);
}

/** The key under which `names` (see openApiSchemaOf) marks a node with the name of its exported schema. */
export const SCHEMA_NAME = 'x-skr-watcher-schema-name';

/**
 * The OpenAPI schema of one zod schema, as the API server is to check it. `names` (the Go generator's) marks each node
 * whose zod schema it holds with that name under SCHEMA_NAME; CRDs are written without.
 */
export function openApiSchemaOf(
  schema: z.ZodMiniType,
  path: string,
  names?: ReadonlyMap<object, string>,
): OpenApiSchema {
  const json = z.toJSONSchema(schema, {
    io: 'input', // what the API server holds is what the agent's parse takes in
    unrepresentable: 'any',
    override: (ctx) => {
      const node = ctx.jsonSchema as Record<string, unknown>;
      const facts = crd.get(ctx.zodSchema);
      if (facts) node[FACTS] = facts;
      const name = names?.get(ctx.zodSchema);
      if (name) node[SCHEMA_NAME] = name;
    },
  });
  return structural(json as OpenApiSchema, path);
}

/** The CustomResourceDefinition object of one kind. */
export function customResourceDefinition(source: CustomResourceSource): Record<string, unknown> {
  const properties: Record<string, OpenApiSchema> = {
    apiVersion: { type: 'string' },
    kind: { type: 'string' },
    metadata: { type: 'object' },
    spec: openApiSchemaOf(source.spec, `${source.kind}.spec`),
  };
  if (source.status) properties['status'] = openApiSchemaOf(source.status, `${source.kind}.status`);
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${source.plural}.${source.group}`,
      labels: { 'operator.kyma-project.io/managed-by': 'skr-watcher' },
    },
    spec: {
      group: source.group,
      names: {
        kind: source.kind,
        listKind: `${source.kind}List`,
        plural: source.plural,
        singular: source.kind.toLowerCase(),
        ...(source.shortNames.length > 0 ? { shortNames: source.shortNames } : {}),
      },
      scope: source.scope,
      versions: [
        {
          name: source.version,
          served: true,
          storage: true,
          ...(source.status ? { subresources: { status: {} } } : {}),
          additionalPrinterColumns: source.printerColumns,
          schema: {
            openAPIV3Schema: { type: 'object', description: source.description, properties },
          },
        },
      ],
    },
  };
}

/** The text of each generated file, by file name. */
export async function renderCrds(): Promise<Map<string, string>> {
  const options = (await prettier.resolveConfig(join(CRD_DIR, 'x.yaml'))) ?? {};
  const files = new Map<string, string>();
  for (const source of CRDS) {
    const header = [
      `Generated by \`npm run generate\` from ${source.source}; edit that file, not this one.`,
      ...source.comment.split('\n'),
    ]
      .map((line) => `# ${line}`.trimEnd())
      .join('\n');
    const body = stringify(customResourceDefinition(source), { lineWidth: 0, aliasDuplicateObjects: false });
    files.set(source.file, await prettier.format(`${header}\n${body}`, { ...options, parser: 'yaml' }));
  }
  return files;
}

async function main(check: boolean): Promise<number> {
  let stale = 0;
  // Imported here: generate-go.ts builds on this file's openApiSchemaOf.
  const { GO_DIR, renderGoTypes } = await import('./generate-go.js');
  const outputs = [
    ...[...(await renderCrds())].map(([file, text]) => [join(CRD_DIR, file), text] as const),
    ...[...renderGoTypes()].map(([file, text]) => [join(GO_DIR, file), text] as const),
  ];
  for (const [path, text] of outputs) {
    const current = await readFile(path, 'utf8').catch(() => undefined);
    if (current === text) continue;
    stale += 1;
    if (check) console.error(`${path} is not what npm run generate writes`);
    else {
      await mkdir(dirname(path), { recursive: true });
      await writeFile(path, text);
      console.log(`wrote ${path}`);
    }
  }
  return check && stale > 0 ? 1 : 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  // Not a top-level await: main imports generate-go.ts, which imports this module, so this one must finish first.
  main(process.argv.includes('--check')).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    },
  );
}
