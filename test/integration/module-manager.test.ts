// Module managers end to end on real planes: an edit of the Sample CR in an SKR goes through the webhook, the
// listener and the agent into its ModuleConfig, sample-manager (its own process) renders it into a SyncResource,
// and the agent applies that into the same SKR. A careless manager that renders a ClusterRole and a ConfigMap
// outside kyma-system is refused by the agent's allow-list, and sees why on its ModuleConfig condition.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { CoreV1Api, CustomObjectsApi, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS } from '@skr-watcher/api';
import { mergePatchCustomObject } from '@skr-watcher/kube';
import { createModuleManager, syncResourceNameOf, type ModuleManager } from '@skr-watcher/module-manager';
import { SAMPLE_CONFIG_MAP, SAMPLE_MANAGER } from '@skr-watcher/sample-manager';
import { SAMPLE_MODULE, startLocalSystem, type LocalSystem } from '../support/system/index.js';
import { eventually } from '../support/eventually.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('module managers end to end: Module CR edit → ModuleConfig → SyncResource → SKR (real planes)', function () {
  this.timeout(600_000);
  let parent: string;
  let system: LocalSystem;
  let careless: ModuleManager | undefined;

  before(async () => {
    parent = await mkdtemp(join(tmpdir(), 'skr-manager-'));
    system = await startLocalSystem({ dir: join(parent, 'system'), skrs: ['skr1'], sampleManager: true });
  });
  after(async () => {
    await careless?.stop();
    await system?.stop();
    if (parent) await rm(parent, { recursive: true, force: true });
  });

  const moduleConfigOf = async (kyma: string): Promise<Json> => {
    const list = (await system.kcp.makeApiClient(CustomObjectsApi).listNamespacedCustomObject({
      group: GROUP,
      version: KINDS.moduleConfig.version,
      plural: KINDS.moduleConfig.plural,
      namespace: system.namespace,
      labelSelector: `${LABELS.kymaName}=${kyma},${LABELS.moduleName}=${SAMPLE_MODULE.module}`,
    })) as Json;
    return list['items'][0] as Json;
  };
  const conditionOf = (config: Json, manager: string): Json | undefined =>
    (config['status']?.conditions as Json[] | undefined)?.find((c) => c['type'] === `${manager}/Synced`);

  it("a Sample CR edit in the SKR comes back into the SKR as sample-manager's ConfigMap, and the ModuleConfig says Applied", async () => {
    const skr = system.skr('skr1');
    const greeting = `round trip ${Date.now()}`;
    const { module: _module, ...ref } = SAMPLE_MODULE;
    await mergePatchCustomObject(skr.kubeConfig().makeApiClient(CustomObjectsApi), ref, {
      spec: { greeting },
    });

    const core = skr.kubeConfig().makeApiClient(CoreV1Api);
    const map = await eventually(
      'the rendered ConfigMap in skr1',
      async () => {
        const found = await core.readNamespacedConfigMap(SAMPLE_CONFIG_MAP);
        return found.data?.['greeting'] === greeting ? found : undefined;
      },
      60_000,
    );
    expect(map.data).to.include({ module: 'sample' });
    const config = await eventually(
      'the Applied condition for the edited generation',
      async () => {
        const found = await moduleConfigOf('skr1');
        const condition = conditionOf(found, SAMPLE_MANAGER.name);
        return condition?.['reason'] === 'Applied' &&
          condition['observedGeneration'] === found['metadata'].generation
          ? found
          : undefined;
      },
      60_000,
    );
    expect(conditionOf(config, SAMPLE_MANAGER.name)?.['status']).to.equal('True');
    // The agent's own status on the same ModuleConfig is intact.
    expect(config['status'].sourceResourceVersion).to.be.a('string');
  });

  it('a careless manager rendering a ClusterRole and a ConfigMap outside kyma-system is refused, and sees why on its ModuleConfig', async () => {
    careless = createModuleManager({
      name: 'careless-manager',
      module: SAMPLE_MODULE.module,
      kubeConfig: system.kcp,
      namespace: system.namespace,
      render: () => [
        {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'ClusterRole',
          metadata: { name: 'careless-admin' },
          rules: [{ apiGroups: ['*'], resources: ['*'], verbs: ['*'] }],
        },
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: 'careless', namespace: 'kube-system' },
          data: { a: 'b' },
        },
      ],
    });
    await careless.start();
    const config = await eventually(
      "careless-manager's ItemsFailed condition",
      async () => {
        const found = await moduleConfigOf('skr1');
        return conditionOf(found, 'careless-manager')?.['reason'] === 'ItemsFailed' ? found : undefined;
      },
      60_000,
    );
    const condition = conditionOf(config, 'careless-manager') as Json;
    expect(condition['status']).to.equal('False');
    // sample-manager's condition on the same ModuleConfig is its own, and unaffected.
    expect(conditionOf(config, SAMPLE_MANAGER.name)?.['status']).to.equal('True');

    const sync = (await system.kcp.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
      group: GROUP,
      version: KINDS.syncResource.version,
      plural: KINDS.syncResource.plural,
      namespace: system.namespace,
      name: syncResourceNameOf('careless-manager', config['metadata'].name),
    })) as Json;
    expect(sync['status'].state).to.equal('Error');
    const items = sync['status'].items as Json[];
    expect(items.map((item) => item['state'])).to.deep.equal(['Error', 'Error']);
    // The agent's reason for each refusal (allow-list of kinds, of namespaces) is what the manager sees.
    expect(items[0]?.['message']).to.contain('ClusterRole');
    expect(items[1]?.['message']).to.contain('kube-system');
    for (const item of items) expect(condition['message']).to.contain(item['message']);

    const skr = system.skr('skr1').kubeConfig();
    const roles = await skr.makeApiClient(RbacAuthorizationV1Api).listClusterRole();
    expect(roles.items.map((role) => role.metadata?.name)).to.not.include('careless-admin');
    const maps = await skr.makeApiClient(CoreV1Api).listNamespacedConfigMap({ namespace: 'kube-system' });
    expect(maps.items.map((map) => map.metadata?.name)).to.not.include('careless');
  });
});
