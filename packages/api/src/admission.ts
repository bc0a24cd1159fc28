// AdmissionReview admission.k8s.io/v1: the part of it the webhook reads, validated.
import { z } from 'zod';
import { describeIssues, type ParseResult } from './events.js';

export const ADMISSION_API_VERSION = 'admission.k8s.io/v1';
/**
 * Older API servers, and webhook configurations that list it first in admissionReviewVersions, send v1beta1;
 * its request has the same fields, and the answer must come back in the version the review came in.
 */
export const ADMISSION_API_VERSIONS = [ADMISSION_API_VERSION, 'admission.k8s.io/v1beta1'] as const;
export type AdmissionApiVersion = (typeof ADMISSION_API_VERSIONS)[number];

const gvk = z.object({ group: z.string(), version: z.string().min(1), kind: z.string().min(1) });
const gvr = z.object({ group: z.string(), version: z.string().min(1), resource: z.string().min(1) });

/** An embedded object: only metadata is read, the rest is compared as opaque JSON. */
const embeddedObject = z
  .object({
    apiVersion: z.string().optional(),
    kind: z.string().optional(),
    metadata: z
      .object({
        name: z.string().optional(),
        namespace: z.string().optional(),
        deletionTimestamp: z.string().nullable().optional(),
      })
      .passthrough()
      .optional(),
  })
  .passthrough();

export const admissionRequestSchema = z.object({
  uid: z.string().min(1).max(128),
  kind: gvk,
  resource: gvr,
  subResource: z.string().optional(),
  requestKind: gvk.optional(),
  requestResource: gvr.optional(),
  requestSubResource: z.string().optional(),
  name: z.string().optional(),
  namespace: z.string().optional(),
  operation: z.enum(['CREATE', 'UPDATE', 'DELETE', 'CONNECT']),
  userInfo: z.object({ username: z.string().optional() }).passthrough().optional(),
  object: embeddedObject.nullable().optional(),
  oldObject: embeddedObject.nullable().optional(),
  dryRun: z.boolean().optional(),
  options: z.unknown().optional(),
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
