// What the module-installation suites share: a real registry (testenv's go-containerregistry build), modules
// published into it with @skr-watcher/oci's publishModule (modulectl's layout), their catalog applied in the KCP,
// a Kyma with its kubeconfig Secret, and a reconciler with module installation on, driven pass by pass.
import { readFile } from 'node:fs/promises';
import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS } from '@skr-watcher/api';
import { publishModule, registryConfigFromFlags, type ModuleVersion } from '@skr-watcher/oci';
import { startRegistry, type Registry } from '@skr-watcher/testenv';
import { kubeConfigAsAgent } from '../../../test/support/kcp-rbac.js';
import { createManager, type Manager, type ManagerOptions } from '../../src/manager/index.js';
import {
  createRegistryInstallation,
  type RegistryInstallation,
  type RegistryInstallationOptions,
} from '../../src/reconcile/manifests/source.js';
import { custom, getOrUndefined, kcpAndSkrForSuite, kymaRef, refTo, untilInWatchCache } from './planes.js';

export type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** A CRD of kind `kind` in group `<module>.test.io`, namespaced, serving `versions` (the last one stored), with a free-form spec. */
export function crdYaml(group: string, kind: string, versions: readonly string[] = ['v1']): string {
  const plural = `${kind.toLowerCase()}s`;
  const served = versions.map(
    (name, index) => `  - name: ${name}
    served: true
    storage: ${index === versions.length - 1}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`,
  );
  return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ${plural}.${group}
spec:
  group: ${group}
  names: {kind: ${kind}, plural: ${plural}, singular: ${kind.toLowerCase()}, listKind: ${kind}List}
  scope: Namespaced
  versions:
${served.join('')}`;
}

/** The CR kind of a test module, in a group of its own, so suites share the SKR without meeting. */
export function moduleKind(module: string): { group: string; kind: string; plural: string } {
  const kind = module
    .split('-')
    .map((part) => `${part[0]!.toUpperCase()}${part.slice(1)}`)
    .join('');
  return { group: `${module}.test.io`, kind, plural: `${kind.toLowerCase()}s` };
}

export function configMapYaml(name: string, namespace: string, data: Record<string, string> = {}): string {
  return `apiVersion: v1
kind: ConfigMap
metadata:
  name: ${name}
  namespace: ${namespace}
data: ${JSON.stringify(data)}
`;
}

export const docs = (...parts: string[]) => parts.join('---\n');

/** The suite's planes, registry and helpers; call inside `describe`. */
export function moduleSuite() {
  const planes = kcpAndSkrForSuite();
  const state = {
    registry: undefined as unknown as Registry,
    ns: '',
    counter: 0,
    manager: undefined as Manager | undefined,
    installation: undefined as RegistryInstallation | undefined,
  };
  before(async function () {
    state.registry = await startRegistry();
  });
  after(async function () {
    await state.registry?.stop();
  });
  beforeEach(async function () {
    state.counter += 1;
    state.ns = `mi-${process.pid}-${state.counter}`;
    await planes.kcp.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: state.ns } } });
  });
  afterEach(async function () {
    await state.manager?.close();
    await state.installation?.close();
    state.manager = undefined;
    state.installation = undefined;
    await getOrUndefined(() =>
      custom(planes.skr).deleteNamespacedCustomObject(kymaRef('kyma-system', 'default')),
    );
  });

  const api = () => custom(planes.kcp);
  const target = () => registryConfigFromFlags({ ociRegistryHost: `http://${state.registry.host}` });

  /** Publishes a module version and applies its ModuleTemplate and ModuleReleaseMeta in the test's namespace. */
  async function publish(module: Omit<ModuleVersion, 'ocmComponentName'> & { ocmComponentName?: string }) {
    const full = { ocmComponentName: `kyma-project.io/module/${module.moduleName}`, ...module };
    const published = await publishModule(target(), full, { namespace: state.ns });
    await applyCatalog(published.moduleTemplate);
    await applyCatalog(published.moduleReleaseMeta);
    return published;
  }

  async function applyCatalog(object: { kind: string; metadata: { name: string } }) {
    const kind = object.kind === 'ModuleTemplate' ? 'moduleTemplate' : 'moduleReleaseMeta';
    await api().patchNamespacedCustomObject(
      { ...refTo(kind, state.ns, object.metadata.name), body: object, fieldManager: 'test', force: true },
      setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
    );
  }

  /** A KCP Kyma whose SKR is skr1, with its kubeconfig Secret. */
  async function kyma(name: string, modules: Json[]): Promise<Json> {
    const core = planes.kcp.makeApiClient(CoreV1Api);
    const secret = `kubeconfig-${name}`;
    await core.createNamespacedSecret({
      namespace: state.ns,
      body: {
        metadata: { name: secret, namespace: state.ns, labels: { [LABELS.kymaName]: name } },
        data: {
          config: Buffer.from(await readFile(planes.env.plane('skr1').kubeconfigPath)).toString('base64'),
        },
      },
    });
    await untilInWatchCache(
      () => core.listNamespacedSecret({ namespace: state.ns, resourceVersion: '0' }),
      secret,
    );
    return (await api().createNamespacedCustomObject({
      ...kymaRef(state.ns, name),
      body: {
        apiVersion: `${GROUP}/${KINDS.kyma.version}`,
        kind: KINDS.kyma.kind,
        metadata: { name, namespace: state.ns, labels: { [LABELS.runtimeId]: name } },
        spec: { channel: 'regular', modules, sync: { moduleCatalog: false } },
      },
    })) as Json;
  }

  async function skrModules(modules: Json[]): Promise<void> {
    await custom(planes.skr).patchNamespacedCustomObject(
      { ...kymaRef('kyma-system', 'default'), body: { spec: { modules } } },
      mergePatch,
    );
  }

  /** The agent's module settings for the suite's registry. */
  const settings = () => ({ registryHost: `http://${state.registry.host}`, cacheBytes: 32 * 1024 * 1024 });

  async function start(
    options: Partial<RegistryInstallationOptions> = {},
    reconcilerOptions: Pick<ManagerOptions, 'clock' | 'kcpTimeoutMs' | 'purge'> = {},
  ): Promise<Manager> {
    state.installation = await createRegistryInstallation({ settings: settings(), ...options });
    state.manager = createManager({
      kcp: await kubeConfigAsAgent(planes.kcp, state.ns),
      namespace: state.ns,
      skrTimeoutMs: 10_000,
      modules: state.installation,
      ...reconcilerOptions,
    });
    return state.manager;
  }

  async function kcpKyma(name: string): Promise<Json> {
    return (await api().getNamespacedCustomObject(kymaRef(state.ns, name))) as Json;
  }

  async function moduleStatus(kymaName: string, module: string): Promise<Json | undefined> {
    return ((await kcpKyma(kymaName)).status?.modules ?? []).find((m: Json) => m.name === module);
  }

  /** Reconciles the Kyma until `done` holds (a pass per try; generous for a loaded 2-core machine). */
  async function reconcileUntil(
    kymaName: string,
    done: () => Promise<boolean>,
    what: string,
    tries = 40,
  ): Promise<void> {
    let last: unknown;
    for (let attempt = 0; attempt < tries; attempt++) {
      try {
        await state.manager!.reconciler.reconcile(`${state.ns}/${kymaName}`);
      } catch (error) {
        last = error;
      }
      if (await done()) return;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    throw new Error(`${what}: not reached after ${tries} passes (last pass error: ${String(last)})`, {
      cause: last,
    });
  }

  /** Deletes the KCP Kyma and reconciles until it is gone (its modules removed from the SKR first). */
  async function deleteKyma(name: string): Promise<void> {
    await api().deleteNamespacedCustomObject(kymaRef(state.ns, name));
    await reconcileUntil(
      name,
      async () =>
        (await getOrUndefined(() => api().getNamespacedCustomObject(kymaRef(state.ns, name)))) === undefined,
      'Kyma gone',
    );
  }

  async function manifests(): Promise<Json[]> {
    return (
      (await api().listNamespacedCustomObject({
        group: GROUP,
        version: KINDS.manifest.version,
        plural: KINDS.manifest.plural,
        namespace: state.ns,
      })) as { items: Json[] }
    ).items;
  }

  return {
    planes,
    state,
    api,
    target,
    publish,
    applyCatalog,
    kyma,
    skrModules,
    settings,
    start,
    kcpKyma,
    moduleStatus,
    reconcileUntil,
    deleteKyma,
    manifests,
  };
}
