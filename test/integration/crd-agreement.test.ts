// The agent's schemas and the generated CRDs agree, checked on a real API server (decision 018): for every
// kind, seeded objects drawn from the CRD's own schema are created with strict field validation (status through
// the status subresource) and must be accepted; read back, each must parse with the schema the agent reads the
// kind with; and what the agent would write back from what it parsed (catalog copies, statuses, mirrors) must be
// accepted with strict validation too. Catalog copies are written from the parsed spec, so parsing must keep it whole.
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import {
  CRDS,
  kymaSchema,
  manifestSchema,
  moduleConfigSchema,
  moduleReleaseMetaSchema,
  moduleTemplateSchema,
  syncResourceSchema,
  watcherSchema,
  type CustomResourceSource,
} from '@skr-watcher/api';
import { sharedEnvironment } from '@skr-watcher/testenv';
import { expect } from 'chai';
import type * as z from 'zod/mini';
import { SAMPLE_RUNS, SAMPLE_SEED, drawnObjects, type Drawn } from '../support/crd-samples.js';

type Json = Record<string, unknown>;

/** Objects per kind; each costs four requests (create and status on two planes) and one parse. */
const RUNS = Number(process.env['CRD_AGREEMENT_RUNS'] ?? SAMPLE_RUNS);
const SEED = Number(process.env['CRD_AGREEMENT_SEED'] ?? SAMPLE_SEED);
const CONCURRENCY = 16;
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** The schema the agent reads each kind with (packages/api/src/schemas/parse.ts). */
const AGENT_SCHEMAS: Record<string, z.ZodMiniType> = {
  Kyma: kymaSchema,
  ModuleTemplate: moduleTemplateSchema,
  ModuleReleaseMeta: moduleReleaseMetaSchema,
  Watcher: watcherSchema,
  ModuleConfig: moduleConfigSchema,
  SyncResource: syncResourceSchema,
  Manifest: manifestSchema,
};

/** Kinds whose spec the agent copies into SKRs as parsed (catalog.ts): parsing must drop nothing. */
const COPIED_SPECS = new Set(['ModuleTemplate', 'ModuleReleaseMeta']);

/** Documented places where the agent reads less than the CRD accepts (see the schemas' comments). */
function statusUnreadable(kind: string, status: Json | undefined): boolean {
  if (kind !== 'Kyma' || !Array.isArray(status?.['modules'])) return false;
  // A module state '' (upstream's enum has it): the Kyma status reads as absent and is rewritten.
  return (status['modules'] as Json[]).some((module) => module['state'] === '');
}

/**
 * The agent's own checks, which the CRDs leave out on purpose: an empty name (zod's `.min(1, 'is required')`) or a
 * label selector operator other than the four it evaluates (common.ts) is an error on that object or module, named in
 * its message, where the API server lets it through.
 */
function agentOwnCheck(issue: z.core.$ZodIssue): boolean {
  if (issue.code === 'too_small' && issue.origin === 'string') return true;
  return issue.code === 'invalid_value' && issue.path.at(-1) === 'operator';
}

async function inPool<T>(items: T[], work: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < items.length) {
        const index = next++;
        await work(items[index]!, index);
      }
    }),
  );
}

function describeError(error: unknown): string {
  const body = (error as { body?: unknown }).body;
  return typeof body === 'string' ? body.slice(0, 600) : String(error);
}

/** Retries a request that failed without an answer (a reset connection on a loaded machine); HTTP errors are final. */
async function answered<T>(request: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await request();
    } catch (error) {
      if ((error as { code?: unknown }).code !== undefined || attempt >= 4) throw error;
      await new Promise((resolve) => setTimeout(resolve, 250 * attempt));
    }
  }
}

/** Creates the object with strict field validation, then its status; the stored object. */
async function createStrict(
  kc: KubeConfig,
  source: CustomResourceSource,
  namespace: string,
  name: string,
  drawn: Drawn,
) {
  const api = kc.makeApiClient(CustomObjectsApi);
  const ref = { group: source.group, version: source.version, plural: source.plural, namespace, name };
  const body = {
    apiVersion: `${source.group}/${source.version}`,
    kind: source.kind,
    metadata: { name, namespace },
  };
  let stored = (await answered(() =>
    api.createNamespacedCustomObject({
      ...ref,
      body: { ...body, spec: drawn.spec },
      fieldValidation: 'Strict',
    }),
  )) as Json;
  if (drawn.status !== undefined) {
    stored = (await answered(() =>
      api.patchNamespacedCustomObjectStatus(
        { ...ref, body: { status: drawn.status }, fieldValidation: 'Strict' },
        mergePatch,
      ),
    )) as Json;
  }
  return stored;
}

describe('CRDs and the agent schemas agree on a real API server', function () {
  this.timeout(600_000);
  let kcp: KubeConfig;
  let skr: KubeConfig;
  const namespace = `crd-agreement-${process.pid}`;

  before(async () => {
    const env = await sharedEnvironment();
    kcp = env.plane('kcp').kubeConfig();
    skr = env.plane('skr1').kubeConfig();
    for (const kc of [kcp, skr]) {
      await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
    }
  });

  after(async () => {
    for (const kc of [kcp, skr]) {
      await kc
        .makeApiClient(CoreV1Api)
        .deleteNamespace({ name: namespace })
        .catch(() => undefined);
    }
  });

  for (const source of CRDS) {
    it(`${source.kind}: ${RUNS} objects drawn from its CRD are accepted, read by the agent, and what it writes back is accepted`, async () => {
      const objects = drawnObjects(source, RUNS, SEED);
      const agentSchema = AGENT_SCHEMAS[source.kind];
      expect(agentSchema, `no agent schema listed for ${source.kind}`).to.not.equal(undefined);
      const failures: string[] = [];
      let refusedByOwnChecks = 0;
      await inPool(objects, async (drawn, index) => {
        const name = `${source.plural.slice(0, 20)}-${index}`;
        const shown = JSON.stringify(drawn).slice(0, 800);
        let stored: Json;
        try {
          stored = await createStrict(kcp, source, namespace, name, drawn);
        } catch (error) {
          failures.push(
            `${name}: the API server refused a drawn object: ${describeError(error)}\n  ${shown}`,
          );
          return;
        }
        const parsed = agentSchema!.safeParse(stored);
        if (!parsed.success && parsed.error.issues.every(agentOwnCheck)) {
          refusedByOwnChecks += 1;
          return;
        }
        if (!parsed.success) {
          failures.push(
            `${name}: the agent cannot read it: ${parsed.error.issues[0]?.message} at ${parsed.error.issues[0]?.path.join('.')}\n  ${JSON.stringify(stored).slice(0, 800)}`,
          );
          return;
        }
        const read = parsed.data as { spec: Json; status?: Json };
        const storedStatus = stored['status'] as Json | undefined;
        if (source.status && storedStatus !== undefined && source.kind !== 'Watcher') {
          const unreadable = statusUnreadable(source.kind, storedStatus);
          if ((read.status === undefined) !== unreadable) {
            failures.push(
              `${name}: status ${unreadable ? 'read although documented unreadable' : 'read as absent'}\n  ${JSON.stringify(storedStatus).slice(0, 800)}`,
            );
            return;
          }
        }
        if (COPIED_SPECS.has(source.kind)) {
          try {
            expect(read.spec).to.deep.equal(stored['spec']);
          } catch {
            failures.push(
              `${name}: parsing dropped or changed spec fields the SKR copy needs\n  ${JSON.stringify(stored['spec']).slice(0, 800)}\n  ${JSON.stringify(read.spec).slice(0, 800)}`,
            );
            return;
          }
        }
        // What the agent holds, written back (a catalog copy, a status, a mirror) into the other plane.
        const written: Drawn = {
          spec: read.spec,
          ...(source.status && read.status ? { status: read.status } : {}),
        };
        try {
          await createStrict(skr, source, namespace, name, written);
        } catch (error) {
          failures.push(
            `${name}: the API server refused what the agent would write: ${describeError(error)}\n  ${JSON.stringify(written).slice(0, 800)}`,
          );
        }
      });
      expect(failures.length, failures.slice(0, 5).join('\n')).to.equal(0);
      // Enough objects must get through the agent's own checks for the rest of the test to mean something.
      expect(refusedByOwnChecks, "objects refused by the agent's own checks").to.be.below(
        objects.length * 0.8,
      );
    });
  }
});
