// The module catalog copies in an SKR (decision 016): every pass lists the copies the agent made and
// decides on their names and digest annotations only, so it lists them as metadata; a real ModuleTemplate's spec
// (descriptor, default CR) is several kB that the API server would encode and the agent parse on every pass.
// Drift is still repaired from the metadata: a deleted copy or one whose digest differs is applied again, one whose
// spec another manager edited (managedFields) is replaced, a copy no longer in the catalog is deleted, an object
// the agent did not copy is left alone. Real API server; the client's
// response bound shows what was read, the request counters what was sent.
import { expect } from 'chai';
import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS, MANAGED_BY, parseKyma, type Kyma } from '@skr-watcher/api';
import {
  createClusterClient,
  isResponseTooLarge,
  kubeRequestMetrics,
  type ClusterClient,
} from '@skr-watcher/kube';
import { startEnvironment, type Environment } from '@skr-watcher/testenv';
import { createRegistry, type Registry } from '@skr-watcher/telemetry';
import { CATALOG_DIGEST_ANNOTATION, syncModuleCatalog } from '../src/reconcile/modules/catalog.js';
import { realisticCatalog } from '../../test/support/module-catalog.js';
import { refTo } from './support/planes.js';

/**
 * Above the metadata of the copies of three modules (six templates and three metas with their managedFields, under
 * 12 kB), below their templates in full (about 8 kB each).
 */
const METADATA_BOUND_BYTES = 16 * 1024;
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

describe('SKR module catalog copies (metadata-only lists)', function () {
  this.timeout(120_000);
  let env: Environment;
  let api: CustomObjectsApi;
  let counter = 0;
  let namespace: string;
  let registry: Registry;
  let skr: ClusterClient;

  const kyma: Kyma = parseKyma(
    {
      apiVersion: `${GROUP}/${KINDS.kyma.version}`,
      kind: KINDS.kyma.kind,
      metadata: { name: 'kyma-catalog', namespace: 'kcp-system' },
      spec: { channel: 'regular' },
    },
    'test Kyma',
  );

  const requests = async () =>
    ((await registry.getSingleMetric('skr_agent_kube_requests_total')?.get())?.values ?? [])
      .map((v) => [v.labels['verb'], v.labels['resource'], v.value])
      .sort();
  const copies = async (kind: 'moduleTemplate' | 'moduleReleaseMeta') => {
    const { group, version, plural } = refTo(kind, namespace, '');
    const list = (await api.listNamespacedCustomObject({ group, version, plural, namespace })) as {
      items: { metadata: { name: string; annotations?: Record<string, string> } }[];
    };
    return new Map(list.items.map((item) => [item.metadata.name, item.metadata.annotations]));
  };

  /** Passes until one sends nothing but the two metadata lists (the watch cache has caught up with the writes). */
  const untilAPassOnlyLists = async (catalog: ReturnType<typeof realisticCatalog>) => {
    for (let attempt = 0; ; attempt++) {
      registry.resetMetrics();
      expect(await syncModuleCatalog(kyma, skr, namespace, catalog)).to.include({ ok: true });
      const sent = await requests();
      if (sent.length === 2 || attempt > 20) {
        expect(sent).to.deep.equal([
          ['list', 'modulereleasemetas', 1],
          ['list', 'moduletemplates', 1],
        ]);
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };

  before(async () => {
    env = await startEnvironment({ planes: ['skr'] });
    // The environment serves the project's CRDs, the catalog's among them.
    api = env.plane('skr').kubeConfig().makeApiClient(CustomObjectsApi);
  });
  after(async () => env?.stop());

  beforeEach(async () => {
    counter += 1;
    namespace = `catalog-${counter}`;
    await env
      .plane('skr')
      .kubeConfig()
      .makeApiClient(CoreV1Api)
      .createNamespace({ body: { metadata: { name: namespace } } });
    registry = createRegistry();
    // A new client, as for a Kyma just taken over; a full list of the copies fails with ResponseTooLargeError.
    skr = await createClusterClient(env.plane('skr').kubeConfig(), {
      name: 'skr',
      maxResponseBytes: METADATA_BOUND_BYTES,
      metrics: { kind: 'skr', counters: kubeRequestMetrics(registry) },
    });
  });
  afterEach(async () => skr?.close());

  it('copies a catalog into an empty SKR namespace, then passes over it with two metadata lists', async () => {
    const catalog = realisticCatalog('kcp-system', 3);
    const first = await syncModuleCatalog(kyma, skr, namespace, catalog);
    expect(first).to.include({ ok: true, reason: 'Synchronized' });
    expect((await copies('moduleTemplate')).size).to.equal(6);
    expect((await copies('moduleReleaseMeta')).size).to.equal(3);

    // The bound only means something if the copies in full do not pass under it.
    const { group, version, plural } = refTo('moduleTemplate', namespace, '');
    const full = await skr.custom
      .listNamespacedCustomObject({ group, version, plural, namespace, resourceVersion: '0' })
      .catch((e: unknown) => e);
    expect(isResponseTooLarge(full), 'full list of the template copies').to.equal(true);

    // The watch cache may lag the writes by a moment: a pass that saw an older list would rewrite what it missed.
    await untilAPassOnlyLists(catalog);
    // What the two lists brought, as the client counts it: the metadata of nine copies, under the bound.
    const received = (
      (await registry.getSingleMetric('skr_agent_kube_response_bytes_total')?.get())?.values ?? []
    )
      .map((v) => [v.labels['verb'], v.labels['resource'], v.value])
      .sort();
    expect(received.map(([verb, resource]) => `${verb} ${resource}`)).to.deep.equal([
      'list modulereleasemetas',
      'list moduletemplates',
    ]);
    for (const [, , bytes] of received) expect(bytes).to.be.within(1_000, METADATA_BOUND_BYTES);
  });

  it('puts back a deleted or re-stamped copy, deletes one no longer offered, leaves alone what it did not copy', async () => {
    const catalog = realisticCatalog('kcp-system', 3);
    expect(await syncModuleCatalog(kyma, skr, namespace, catalog)).to.include({ ok: true });
    const [deleted, edited] = catalog.templates.map((template) => template.metadata.name);
    const meta = catalog.metas[0]!.metadata.name;
    const ours = await copies('moduleTemplate');
    await api.deleteNamespacedCustomObject(refTo('moduleTemplate', namespace, deleted!));
    await api.patchNamespacedCustomObject(
      {
        ...refTo('moduleTemplate', namespace, edited!),
        body: {
          metadata: { annotations: { [CATALOG_DIGEST_ANNOTATION]: 'edited' } },
          spec: { version: '9.9.9' },
        },
      },
      mergePatch,
    );
    await api.patchNamespacedCustomObject(
      {
        ...refTo('moduleReleaseMeta', namespace, meta),
        body: { metadata: { annotations: { [CATALOG_DIGEST_ANNOTATION]: null } } },
      },
      mergePatch,
    );
    // A copy of a module no longer offered, and someone else's template in the same namespace.
    const { group, version, plural } = refTo('moduleTemplate', namespace, '');
    const stale = { ...catalog.templates[0]!, metadata: { name: 'retired-1.0.0', namespace } };
    await api.createNamespacedCustomObject({
      group,
      version,
      plural,
      namespace,
      body: { ...stale, metadata: { ...stale.metadata, labels: { [LABELS.managedBy]: MANAGED_BY } } },
    });
    await api.createNamespacedCustomObject({
      group,
      version,
      plural,
      namespace,
      body: { ...stale, metadata: { name: 'users-own-1.0.0', namespace } },
    });

    // Until the watch cache has seen every change above, a pass may repair only some of them.
    for (let attempt = 0; ; attempt++) {
      expect(await syncModuleCatalog(kyma, skr, namespace, catalog)).to.include({ ok: true });
      const now = await copies('moduleTemplate');
      const metas = await copies('moduleReleaseMeta');
      const repaired =
        now.get(deleted!)?.[CATALOG_DIGEST_ANNOTATION] === ours.get(deleted!)?.[CATALOG_DIGEST_ANNOTATION] &&
        now.get(edited!)?.[CATALOG_DIGEST_ANNOTATION] === ours.get(edited!)?.[CATALOG_DIGEST_ANNOTATION] &&
        metas.get(meta)?.[CATALOG_DIGEST_ANNOTATION] !== undefined &&
        !now.has('retired-1.0.0');
      if (repaired || attempt > 20) {
        expect([...now.keys()].sort()).to.deep.equal(
          [...ours.keys(), 'users-own-1.0.0'].sort(),
          'our copies back, the retired one gone, the user’s kept',
        );
        expect(repaired, 'every copy stamped with its digest again').to.equal(true);
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const editedNow = (await api.getNamespacedCustomObject(refTo('moduleTemplate', namespace, edited!))) as {
      spec: { version: string };
    };
    expect(editedNow.spec.version).to.equal('1.1.0');
  });

  it('replaces a copy whose spec was edited with its digest annotation left as it was, fields the edit added included', async () => {
    const catalog = realisticCatalog('kcp-system', 2);
    expect(await syncModuleCatalog(kyma, skr, namespace, catalog)).to.include({ ok: true });
    const edited = catalog.templates[1]!.metadata.name;
    const before = (await copies('moduleTemplate')).get(edited);
    // kubectl edit: a changed field and an added one; the annotations stay as the agent wrote them.
    await api.patchNamespacedCustomObject(
      {
        ...refTo('moduleTemplate', namespace, edited),
        body: { spec: { version: '9.9.9', requiresDowntime: true } },
        fieldManager: 'kubectl-edit',
      },
      mergePatch,
    );
    expect((await copies('moduleTemplate')).get(edited)).to.deep.equal(before);

    const read = async () =>
      (await api.getNamespacedCustomObject(refTo('moduleTemplate', namespace, edited))) as {
        spec: { version: string; requiresDowntime?: boolean };
      };
    // Until the watch cache has the edit, a pass finds nothing to do.
    for (let attempt = 0; ; attempt++) {
      expect(await syncModuleCatalog(kyma, skr, namespace, catalog)).to.include({ ok: true });
      const now = await read();
      if (now.spec.version === catalog.templates[1]!.spec.version || attempt > 20) {
        expect(now.spec).to.deep.equal(catalog.templates[1]!.spec);
        expect(now.spec.requiresDowntime, 'the field the edit added').to.equal(undefined);
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }

    // Another manager applies (server-side) a value the agent sets as well: both own the field, the value is
    // right. One replace clears the ownership; after that a pass writes nothing.
    await api.patchNamespacedCustomObject(
      {
        ...refTo('moduleTemplate', namespace, edited),
        body: {
          apiVersion: `${GROUP}/${KINDS.moduleTemplate.version}`,
          kind: KINDS.moduleTemplate.kind,
          metadata: { name: edited, namespace },
          spec: { version: catalog.templates[1]!.spec.version },
        },
        fieldManager: 'someone-else',
      },
      setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
    );
    // Repaired for good: once the cache has the replacement, a pass writes nothing.
    await untilAPassOnlyLists(catalog);
  });
});
