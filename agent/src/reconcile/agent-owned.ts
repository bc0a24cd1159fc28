// What the agent itself runs in an SKR, which no SyncResource may overwrite or delete, whatever the allow-list
// says: the webhook's TLS Secret, configuration, Deployment, Service, ServiceAccount, ClusterRole and
// binding, and NetworkPolicy, the CRDs the agent installs, the SKR Kyma, the module catalog copies, the image pull
// Secret copy, the Module CRs of the Kyma's modules and the objects of its Manifests. Built from the builders and
// constants those objects come from, so a new object there is guarded here without a second list.
import { GROUP, KINDS, splitApiVersion, type KymaModuleStatus } from '@skr-watcher/api';
import { describeSynced, syncedKey, syncedObjectOf, type SyncedObject } from '@skr-watcher/kube';
import { inClusterResourcesFor, tlsSecretFor, webhookIdentityFor } from '../registration/skr-resources.js';
import { webhookConfigurationFor } from '../registration/webhook-configuration.js';
import { SKR_CRDS } from './kyma/crds.js';

/** What a pass knows the agent runs in this SKR beyond the fixed objects. */
export interface AgentOwnedObjects {
  /** Why the agent keeps this object itself; undefined when it is not the agent's. */
  reasonFor(object: SyncedObject): string | undefined;
}

/** Kind, group and name (any namespace: the SKR namespace is configurable) of the webhook's objects. */
const WEBHOOK_OBJECTS: ReadonlyMap<string, string> = (() => {
  const material = { caBundlePem: '', certPem: '', keyPem: '' };
  const objects = [
    tlsSecretFor(material),
    ...webhookIdentityFor(),
    ...inClusterResourcesFor({ image: 'image', kcpAddress: 'kcp:443', certificateChecksum: '' }),
    webhookConfigurationFor({
      watchers: [],
      moduleResources: [],
      caBundlePem: '',
      target: { kind: 'url', baseUrl: 'https://kcp' },
    }),
  ];
  return new Map(
    objects.map((object) => {
      const entry = syncedObjectOf(object as Parameters<typeof syncedObjectOf>[0]);
      return [kindAndName(entry), `the SKR webhook's ${entry.kind}`] as const;
    }),
  );
})();

const AGENT_CRDS = new Set<string>(SKR_CRDS.map((crd) => crd.name));

/** Kinds of which every object in the SKR is the agent's: the SKR Kyma and the module catalog copies. */
const AGENT_KINDS: ReadonlyMap<string, string> = new Map([
  [`${GROUP}/${KINDS.kyma.kind}`, 'the SKR Kyma'],
  [`${GROUP}/${KINDS.moduleTemplate.kind}`, 'a module catalog copy'],
  [`${GROUP}/${KINDS.moduleReleaseMeta.kind}`, 'a module catalog copy'],
]);

function kindAndName(entry: SyncedObject): string {
  return `${entry.group}/${entry.kind}/${entry.name}`;
}

/**
 * The agent's objects in one SKR: the fixed ones above, the Module CRs of `modules` (the pass's module statuses)
 * and `manifestObjects` (the inventories of the Kyma's Manifests).
 */
export function agentOwnedObjects(
  pass: {
    modules?: readonly KymaModuleStatus[];
    manifestObjects?: readonly SyncedObject[];
    /** The copy of --skr-image-pull-secret. */
    imagePullSecret?: { name: string; namespace: string };
  } = {},
): AgentOwnedObjects {
  const pullSecret = pass.imagePullSecret;
  const moduleCrs = new Set(
    (pass.modules ?? []).flatMap((module) => {
      const resource = module.resource;
      if (!resource?.apiVersion || !resource.kind || !resource.metadata?.name) return [];
      const { group, version } = splitApiVersion(resource.apiVersion);
      return [
        syncedKey({
          group,
          version,
          kind: resource.kind,
          name: resource.metadata.name,
          namespace: resource.metadata.namespace ?? '',
        }),
      ];
    }),
  );
  const manifestObjects = new Set((pass.manifestObjects ?? []).map(syncedKey));
  return {
    reasonFor(object) {
      const why =
        WEBHOOK_OBJECTS.get(kindAndName(object)) ??
        AGENT_KINDS.get(`${object.group}/${object.kind}`) ??
        (object.group === 'apiextensions.k8s.io' &&
        object.kind === 'CustomResourceDefinition' &&
        AGENT_CRDS.has(object.name)
          ? 'a CRD the agent installs'
          : undefined) ??
        (moduleCrs.has(syncedKey(object)) ? "a module's Module CR" : undefined) ??
        (manifestObjects.has(syncedKey(object)) ? "an object of a module's Manifest" : undefined) ??
        (pullSecret &&
        object.group === '' &&
        object.kind === 'Secret' &&
        object.name === pullSecret.name &&
        object.namespace === pullSecret.namespace
          ? "the modules' image pull Secret"
          : undefined);
      return (
        why &&
        `${describeSynced(object)} is ${why}, which the agent keeps itself; no module or SyncResource may touch it; refused`
      );
    },
  };
}
