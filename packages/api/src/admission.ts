// AdmissionReview admission.k8s.io/v1: the part of it the webhook reads, validated.
import * as z from 'zod/mini';
import './zod-messages.js';
import { describeIssues, type ParseResult } from './events.js';

export const ADMISSION_API_VERSION = 'admission.k8s.io/v1';
/**
 * Older API servers, and webhook configurations that list it first in admissionReviewVersions, send v1beta1;
 * its request has the same fields, and the answer must come back in the version the review came in.
 */
export const ADMISSION_API_VERSIONS = [ADMISSION_API_VERSION, 'admission.k8s.io/v1beta1'] as const;
export type AdmissionApiVersion = (typeof ADMISSION_API_VERSIONS)[number];

const nonEmpty = () => z.string().check(z.minLength(1));
const gvk = z.object({ group: z.string(), version: nonEmpty(), kind: nonEmpty() });
const gvr = z.object({ group: z.string(), version: nonEmpty(), resource: nonEmpty() });

/** An embedded object: only metadata is read, the rest is compared as opaque JSON. */
const embeddedObject = z.looseObject({
  apiVersion: z.optional(z.string()),
  kind: z.optional(z.string()),
  metadata: z.optional(
    z.looseObject({
      name: z.optional(z.string()),
      namespace: z.optional(z.string()),
      deletionTimestamp: z.optional(z.nullable(z.string())),
    }),
  ),
});

export const admissionRequestSchema = z.object({
  uid: z.string().check(z.minLength(1), z.maxLength(128)),
  kind: gvk,
  resource: gvr,
  subResource: z.optional(z.string()),
  requestKind: z.optional(gvk),
  requestResource: z.optional(gvr),
  requestSubResource: z.optional(z.string()),
  name: z.optional(z.string()),
  namespace: z.optional(z.string()),
  operation: z.enum(['CREATE', 'UPDATE', 'DELETE', 'CONNECT']),
  userInfo: z.optional(z.looseObject({ username: z.optional(z.string()) })),
  object: z.optional(z.nullable(embeddedObject)),
  oldObject: z.optional(z.nullable(embeddedObject)),
  dryRun: z.optional(z.boolean()),
  options: z.optional(z.unknown()),
});

export const admissionReviewSchema = z.object({
  apiVersion: z.enum(ADMISSION_API_VERSIONS),
  kind: z.literal('AdmissionReview'),
  request: admissionRequestSchema,
});

export type AdmissionRequest = z.infer<typeof admissionRequestSchema>;
export type AdmissionReview = z.infer<typeof admissionReviewSchema>;
export type EmbeddedObject = z.infer<typeof embeddedObject>;

export function parseAdmissionReview(body: unknown): ParseResult<AdmissionReview> {
  const result = admissionReviewSchema.safeParse(body);
  return result.success
    ? { ok: true, value: result.data }
    : { ok: false, error: describeIssues(result.error) };
}

/** The `result.message` of every answer: the webhook watches and never denies. */
export const ADMISSION_ALLOWED_MESSAGE = 'allowed: skr-webhook only watches this change';

/** The answer the webhook always gives: allowed, in the request's apiVersion, with its uid. */
export function allowedResponse(
  uid: string,
  apiVersion: AdmissionApiVersion = ADMISSION_API_VERSION,
): string {
  return JSON.stringify({
    apiVersion,
    kind: 'AdmissionReview',
    // result.message as upstream's webhook answers: the API server shows it in audit logs.
    response: { uid, allowed: true, result: { message: ADMISSION_ALLOWED_MESSAGE } },
  });
}
