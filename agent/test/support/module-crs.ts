// A test module's CRs in the SKR, whatever the scope of its CRD: a module published with a CRD (namespaced or
// cluster-scoped), an operator ConfigMap and a default CR; users' CRs created, held by finalizers, deleted and read;
// the module's operator read; and a module name of its own per test (the ModuleTemplate's pattern allows lower-case
// letters only).
import { CoreV1Api } from '@kubernetes/client-node';
import {
  configMapYaml,
  crdYaml,
  docs,
  mergePatch,
  moduleKind,
  type Json,
  type moduleSuite,
} from './modules.js';
import { custom, getOrUndefined } from './planes.js';

type ModuleSuite = ReturnType<typeof moduleSuite>;

export type CrdScope = 'Namespaced' | 'Cluster';

/** Where a module CR lives: a namespace, or none for a cluster-scoped kind. */
export interface CrAddress {
  name: string;
  namespace?: string;
}

/** A module name unique to the running test and process, in letters only. */
export function uniqueModule(suite: ModuleSuite, base: string): string {
  const letters = process.pid.toString(26).replace(/[0-9]/g, (d) => String.fromCharCode(107 + Number(d)));
  return `${base}-${String.fromCharCode(97 + (suite.state.counter % 26)).repeat(3)}${letters}`;
}

export const operatorOf = (module: string) => `${module}-operator`;

/** The module's operator ConfigMap in the SKR's kyma-system; undefined when it is not there. */
export function readOperator(suite: ModuleSuite, module: string) {
  return getOrUndefined(() =>
    suite.planes.skr
      .makeApiClient(CoreV1Api)
      .readNamespacedConfigMap({ name: operatorOf(module), namespace: 'kyma-system' }),
  );
}

/** The module's CRD in `scope`; the generated YAML is namespaced, so a cluster-scoped one swaps that one line. */
function scopedCrdYaml(module: string, scope: CrdScope): string {
  const { group, kind } = moduleKind(module);
  const yaml = crdYaml(group, kind);
  return scope === 'Namespaced' ? yaml : yaml.replace('scope: Namespaced', 'scope: Cluster');
}

/**
 * Publishes `module` 1.0.0: its CRD in `scope`, an operator ConfigMap in kyma-system and the default CR
 * `<module>-default`, written in kyma-system as upstream's templates write it whatever the CRD's scope (the API
 * server drops the namespace of a cluster-scoped object).
 */
export function publishModuleWithCrs(suite: ModuleSuite, module: string, scope: CrdScope = 'Namespaced') {
  const { group, kind } = moduleKind(module);
  return suite.publish({
    moduleName: module,
    version: '1.0.0',
    rawManifest: docs(scopedCrdYaml(module, scope), configMapYaml(operatorOf(module), 'kyma-system')),
    defaultCr: `apiVersion: ${group}/v1\nkind: ${kind}\nmetadata:\n  name: ${module}-default\n  namespace: kyma-system\nspec:\n  greeting: hello\n`,
  });
}

/** The default CR's address in the SKR for a CRD of `scope`. */
export function defaultCrAddress(module: string, scope: CrdScope): CrAddress {
  return scope === 'Namespaced'
    ? { name: `${module}-default`, namespace: 'kyma-system' }
    : { name: `${module}-default` };
}

/** Reads, creates, holds and deletes CRs of `module`'s kind in the SKR of `suite`. */
export function moduleCrs(suite: ModuleSuite, module: string) {
  const { group, kind, plural } = moduleKind(module);
  const api = () => custom(suite.planes.skr);
  const at = ({ name, namespace }: CrAddress) => ({ group, version: 'v1', plural, name, namespace });

  const read = (address: CrAddress) =>
    getOrUndefined(() =>
      address.namespace
        ? api().getNamespacedCustomObject({ ...at(address), namespace: address.namespace })
        : api().getClusterCustomObject(at(address)),
    ) as Promise<Json | undefined>;

  async function create(address: CrAddress): Promise<void> {
    const body = {
      apiVersion: `${group}/v1`,
      kind,
      metadata: { name: address.name, ...(address.namespace ? { namespace: address.namespace } : {}) },
      spec: {},
    };
    if (address.namespace)
      await api().createNamespacedCustomObject({
        group,
        version: 'v1',
        plural,
        namespace: address.namespace,
        body,
      });
    else await api().createClusterCustomObject({ group, version: 'v1', plural, body });
  }

  async function remove(address: CrAddress): Promise<void> {
    if (address.namespace)
      await api().deleteNamespacedCustomObject({ ...at(address), namespace: address.namespace });
    else await api().deleteClusterCustomObject(at(address));
  }

  /** Sets the CR's finalizers (an empty list lets a deleted CR go). */
  async function hold(address: CrAddress, finalizers: string[]): Promise<void> {
    const body = { metadata: { finalizers } };
    if (address.namespace)
      await api().patchNamespacedCustomObject(
        { ...at(address), namespace: address.namespace, body },
        mergePatch,
      );
    else await api().patchClusterCustomObject({ ...at(address), body }, mergePatch);
  }

  return { read, create, remove, hold };
}
