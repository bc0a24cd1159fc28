// What the API server is told about each kind (docs/decisions/018). The zod schemas are the one description: the
// CRDs in manifests/crds/ are generated from them (`npm run generate`). Two kinds of facts live on a schema:
// - zod's own (types, required fields, enums, structure): shared by the agent's parse and the CRD;
// - facts registered in `crd` below (patterns, lengths, defaults, formats, CEL rules, x-kubernetes-* markers,
//   descriptions): told to the API server only. The agent does not check them: it reads what an API server
//   admitted (ours, or upstream's CRD in an SKR), so they would only turn an object into an error twice.
// zod's own string and number checks (`z.minLength(1, 'is required')`) are the agent's and never reach the CRD.
import * as z from 'zod/mini';
import '../zod-messages.js';
import { GROUP } from '../constants.js';

export type OpenApiValue =
  string | number | boolean | null | OpenApiValue[] | { [key: string]: OpenApiValue };

/** One node of an OpenAPI v3 schema as a CRD holds it. */
export interface OpenApiSchema {
  [keyword: string]: OpenApiValue;
}

/**
 * Server-only facts of one zod node: OpenAPI keywords merged into the node's generated schema, or `served`, which
 * replaces it whole (a node the API server must check less than the agent does, e.g. an embedded resource whose
 * items are validated one by one).
 */
export interface ServerFacts {
  [keyword: string]: OpenApiValue | undefined;
  served?: OpenApiSchema;
}

/** `schema.register(crd, {pattern: ..., maxLength: ...})` tells the API server about a field. */
export const crd = z.registry<ServerFacts>();

/** A string the API server checks as RFC 3339 (metav1.Time); the agent takes any string. */
export const dateTime = () => z.string().register(crd, { format: 'date-time' });

/** An integer field (int64 in Go); JSON numbers reach the agent as numbers. */
export const int64 = (facts: ServerFacts = {}) =>
  z.number().register(crd, { type: 'integer', format: 'int64', ...facts });

/** An object whose fields are kept as written (a Module CR, a descriptor): the API server prunes none of them. */
export const PRESERVE_UNKNOWN: OpenApiSchema = {
  type: 'object',
  'x-kubernetes-preserve-unknown-fields': true,
};

/** A Kubernetes object inside a field: the API server checks its apiVersion, kind and metadata, nothing more. */
export function embeddedResource(description?: string): ServerFacts {
  return {
    served: {
      type: 'object',
      ...(description ? { description } : {}),
      'x-kubernetes-preserve-unknown-fields': true,
      'x-kubernetes-embedded-resource': true,
    },
  };
}

export interface PrinterColumn {
  name: string;
  type: 'string' | 'date' | 'integer' | 'number' | 'boolean';
  jsonPath: string;
  description?: string;
}

/** Everything of one CRD that is not a field: names, printer columns, subresources, and its two schemas. */
export interface CustomResourceSource {
  kind: string;
  plural: string;
  version: string;
  group: string;
  scope: 'Namespaced' | 'Cluster';
  shortNames: string[];
  /** The file in manifests/crds/, and the schema file it is generated from (for the header). */
  file: string;
  source: string;
  /** The header comment of the generated file: what the kind is, and how it relates to upstream's. */
  comment: string;
  description: string;
  printerColumns: PrinterColumn[];
  spec: z.ZodMiniType;
  /** The status as the API server checks it; absent: the kind has no status (nor status subresource). */
  status?: z.ZodMiniType;
}

const AGE: PrinterColumn = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };

/** A CRD of this project's group; `Age` is appended to the printer columns, as kubectl's default shows it. */
export function customResource(
  names: { kind: string; plural: string; version: string },
  definition: {
    source: string;
    comment: string;
    description: string;
    shortNames?: string[];
    printerColumns?: PrinterColumn[];
    spec: z.ZodMiniType;
    status?: z.ZodMiniType;
  },
): CustomResourceSource {
  return {
    ...names,
    group: GROUP,
    scope: 'Namespaced',
    shortNames: definition.shortNames ?? [],
    file: `${names.plural}.yaml`,
    source: definition.source,
    comment: definition.comment,
    description: definition.description,
    printerColumns: [...(definition.printerColumns ?? []), AGE],
    spec: definition.spec,
    ...(definition.status ? { status: definition.status } : {}),
  };
}
