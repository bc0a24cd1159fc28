// Sharded replicas watch only their own Kymas' dependents (decision 012): ModuleConfigs and
// SyncResources carry their Kyma's bucket label (the agent writes it on ModuleConfigs, the bucket's ring owner puts
// it on a module manager's SyncResource), each replica's watches select the buckets it needs, and a handover widens
// the receiver's watches so the Kymas it acquired are reconciled with their dependents. Two in-process replicas with
// the real sharding, controller and reconciler on a real KCP and SKR.
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import {
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type V1ManagedFieldsEntry,
} from '@kubernetes/client-node';
import { FIELD_MANAGER, GROUP, KINDS, LABELS, SHARDING, type Kyma } from '@skr-watcher/api';
import { createLogger, Registry } from '@skr-watcher/telemetry';
import { startEnvironment, type Environment } from '@skr-watcher/testenv';
import { waitUntil } from '../../test/support/eventually.js';
import { seedKcp, seedKyma } from '../../test/support/kcp-seed.js';
import { createController, type Controller } from '../src/controller.js';
import { createManager } from '../src/manager/index.js';
import { bucketOf, startSharding, type Sharding } from '../src/sharding/index.js';
import { untilCrdsServe } from './support/planes.js';

const NAMESPACE = 'dependents';
const SKR_NS = 'kyma-system';
const KYMAS = Array.from({ length: 8 }, (_, i) => `kyma-${i}`);

interface Replica {
  sharding: Sharding;
  controller: Controller;
  /** Stops the work and hands every owned Kyma to the peer (a graceful leave). */
  leave(): Promise<void>;
}

describe('sharded replicas watch only their own Kymas’ dependents', function () {
  this.timeout(240_000);
  let env: Environment;
  let kcp: KubeConfig;
  let api: CustomObjectsApi;
  const replicas: Replica[] = [];
  const lost: string[] = [];

  async function startReplica(identity: string): Promise<Sharding> {
    return startSharding({
      config: { ring: 'dependents', identity, leaseNamespace: NAMESPACE },
      timing: { leaseDurationMs: 4_000, renewDeadlineMs: 3_000, retryPeriodMs: 500 },
      namespace: NAMESPACE,
      resyncMs: 600_000,
      kubeConfig: kcp,
      onLost: (reason) => lost.push(`${identity}: ${reason}`),
      logger: createLogger(identity, 'silent'),
      registry: new Registry(),
    });
  }

  /** The work of one replica as `skr-agent run --shard` wires it (agent/src/work.ts), without a listener. */
  async function startWork(sharding: Sharding): Promise<Replica> {
    const late: { controller?: Controller } = {};
    const unguarded = createManager({
      kcp,
      namespace: NAMESPACE,
      syncResourceNames: (_namespace, kyma) => late.controller?.syncResourceNames(kyma),
      kubeconfigSecret: (kyma) => late.controller?.kubeconfigSecret(kyma),
      caches: {
        moduleTemplates: () => late.controller?.caches.moduleTemplates(),
        moduleReleaseMetas: () => late.controller?.caches.moduleReleaseMetas(),
        watchers: () => late.controller?.caches.watchers(),
        moduleConfigs: (kyma) => late.controller?.caches.moduleConfigs(kyma),
      },
      requeue: { Ready: 2_000 },
    });
    const controller = createController({
      kcp,
      namespace: NAMESPACE,
      reconciler: {
        reconcile: (key) => sharding.guard(key, () => unguarded.reconciler.reconcile(key), {}, true),
      },
      kymaLabelSelector: sharding.kymaLabelSelector,
      dependents: sharding.dependents,
    });
    late.controller = controller;
    sharding.attach(
      (key) => controller.enqueue(key),
      (key) => {
        unguarded.acquired(key);
        controller.enqueueAcquired(key);
      },
    );
    await controller.start();
    const replica: Replica = {
      sharding,
      controller,
      async leave() {
        sharding.stopStarting();
        await controller.stop();
        await unguarded.close();
        await sharding.leave();
        replicas.splice(replicas.indexOf(replica), 1);
      },
    };
    replicas.push(replica);
    return replica;
  }

  const list = async <T>(kind: keyof typeof KINDS) =>
    (
      (await api.listNamespacedCustomObject({
        group: GROUP,
        version: KINDS[kind].version,
        plural: KINDS[kind].plural,
        namespace: NAMESPACE,
      })) as { items: T[] }
    ).items;
  type Dependent = { metadata: { name: string; labels?: Record<string, string> }; spec: { kyma: string } };
  const bucketLabelled = (dependents: Dependent[]) =>
    dependents.every((d) => d.metadata.labels?.[LABELS.shardBucket] === String(bucketOf(d.spec.kyma)));
  const owners = async () =>
    new Map((await list<Kyma>('kyma')).map((k) => [k.metadata.name, k.metadata.labels?.[LABELS.shardOwner]]));
  const skrConfigMap = (name: string) =>
    env
      .plane('skr1')
      .kubeConfig()
      .makeApiClient(CoreV1Api)
      .readNamespacedConfigMap({ namespace: SKR_NS, name })
      .then(
        () => true,
        () => false,
      );
  const createSyncResource = (kyma: string, name: string, configMap: string) =>
    api.createNamespacedCustomObject({
      group: GROUP,
      version: KINDS.syncResource.version,
      plural: KINDS.syncResource.plural,
      namespace: NAMESPACE,
      // As a module manager writes it: no bucket label.
      body: {
        apiVersion: `${GROUP}/${KINDS.syncResource.version}`,
        kind: KINDS.syncResource.kind,
        metadata: { name, namespace: NAMESPACE },
        spec: {
          kyma,
          items: [
            {
              name: 'map',
              strategy: 'CreateAndSync',
              resource: {
                apiVersion: 'v1',
                kind: 'ConfigMap',
                metadata: { name: configMap, namespace: SKR_NS },
                data: { kyma },
              },
            },
          ],
        },
      },
    });

  before(async () => {
    env = await startEnvironment({ planes: ['kcp', 'skr1'] });
    kcp = env.plane('kcp').kubeConfig();
    api = kcp.makeApiClient(CustomObjectsApi);
    await untilCrdsServe([kcp, env.plane('skr1').kubeConfig()]);
    await env
      .plane('skr1')
      .kubeConfig()
      .makeApiClient(CoreV1Api)
      .createNamespace({ body: { metadata: { name: SKR_NS } } });
    // The sample module's template and release meta; Kymas of our own that share the one SKR.
    await seedKcp(env, NAMESPACE, []);
    const kubeconfig = readFileSync(env.plane('skr1').kubeconfigPath, 'utf8');
    for (const [i, name] of KYMAS.entries()) {
      // One SKR for all: each Kyma's SKR-side copy in a namespace of its own.
      await seedKyma(kcp, NAMESPACE, name, kubeconfig, {
        spec: { sync: { namespace: `shard-${i}` } },
        runtimeId: `runtime-${i}`,
      });
      await createSyncResource(name, `sync-${name}`, `map-${name}`);
    }
  });

  after(async () => {
    for (const replica of [...replicas]) await replica.leave().catch(() => {});
    await env?.stop();
  });

  it('each holds its Kymas’ ModuleConfigs and SyncResources only; a handover widens the receiver’s watches', async () => {
    // Both join before their work starts, as a Deployment's replicas do.
    const shardA = await startReplica('replica-a');
    const shardB = await startReplica('replica-b');
    await waitUntil(
      'both replicas see the ring of two',
      () =>
        shardA.dependents.buckets().size < SHARDING.buckets &&
        shardB.dependents.buckets().size < SHARDING.buckets,
      30_000,
    );
    const a = await startWork(shardA);
    const b = await startWork(shardB);

    await waitUntil(
      'every Kyma Ready, owned by one of the two',
      async () => {
        const kymas = await list<Kyma>('kyma');
        return kymas.every((k) => k.status?.state === 'Ready' && k.metadata.labels?.[LABELS.shardOwner]);
      },
      120_000,
      500,
    ).catch(async (error: unknown) => {
      const states = (await list<Kyma>('kyma')).map(
        (k) =>
          `${k.metadata.name} ${k.metadata.labels?.[LABELS.shardOwner]} ${k.status?.state} ${JSON.stringify(k.status?.conditions?.filter((c) => c.status !== 'True'))}`,
      );
      throw new Error(states.join('\n'), { cause: error });
    });
    const owned = await owners();
    const ofA = KYMAS.filter((k) => owned.get(k) === 'replica-a');
    const ofB = KYMAS.filter((k) => owned.get(k) === 'replica-b');
    expect(ofA.length, 'replica-a owns some').to.be.greaterThan(0);
    expect(ofB.length, 'replica-b owns some').to.be.greaterThan(0);
    // One ModuleConfig and one SyncResource per Kyma: each replica holds its own Kymas' only.
    await waitUntil(
      'each replica holds its own Kymas’ dependents only',
      () => {
        const heldA = a.controller.dependentsHeld();
        const heldB = b.controller.dependentsHeld();
        return (
          heldA.moduleConfigs.objects === ofA.length &&
          heldA.syncResources.objects === ofA.length &&
          heldB.moduleConfigs.objects === ofB.length &&
          heldB.syncResources.objects === ofB.length
        );
      },
      60_000,
    ).catch((error: unknown) => {
      throw new Error(
        `held: a ${JSON.stringify(a.controller.dependentsHeld().moduleConfigs.objects)}/${ofA.length}, b ${JSON.stringify(b.controller.dependentsHeld().moduleConfigs.objects)}/${ofB.length}`,
        { cause: error },
      );
    });
    await waitUntil('the SyncResources labelled by bucket', async () =>
      bucketLabelled(await list('syncResource')),
    );
    for (const name of KYMAS)
      expect(await skrConfigMap(`map-${name}`), `map-${name} in the SKR`).to.equal(true);
    const moduleConfigs = await list<Dependent & { metadata: { managedFields?: V1ManagedFieldsEntry[] } }>(
      'moduleConfig',
    );
    expect(moduleConfigs).to.have.length(KYMAS.length);
    expect(bucketLabelled(moduleConfigs)).to.equal(true);
    // Written by the agent's own apply, not put on afterwards by the labelling of unlabelled dependents.
    for (const config of moduleConfigs) {
      const applied = config.metadata.managedFields?.find(
        (entry) => entry.manager === FIELD_MANAGER && entry.operation === 'Apply',
      );
      expect(JSON.stringify(applied?.fieldsV1), config.metadata.name).to.include(`"f:${LABELS.shardBucket}"`);
    }
    for (const kyma of ofA) {
      expect(a.controller.caches.moduleConfigs(kyma), kyma).to.have.length(1);
      expect(a.controller.syncResourceNames(kyma)).to.deep.equal([`sync-${kyma}`]);
    }
    // Another replica's Kyma: not covered, so a reconcile would list (never an empty answer taken for "none").
    for (const kyma of ofB) {
      expect(a.controller.caches.moduleConfigs(kyma), kyma).to.equal(undefined);
      expect(a.controller.syncResourceNames(kyma), kyma).to.equal(undefined);
    }

    // B leaves: A acquires B's Kymas, its watches grow to their buckets, and it reconciles them with their dependents.
    const acquired = ofB[0] as string;
    await b.leave();
    await waitUntil('replica-a owns every Kyma', async () =>
      [...(await owners()).values()].every((owner) => owner === 'replica-a'),
    );
    await waitUntil(
      'replica-a holds every Kyma’s dependents',
      () =>
        a.controller.dependentsHeld().moduleConfigs.objects === KYMAS.length &&
        a.controller.dependentsHeld().syncResources.objects === KYMAS.length,
    );
    expect(a.controller.caches.moduleConfigs(acquired)).to.have.length(1);
    // A module manager's new SyncResource for the acquired Kyma: labelled by its new owner and applied to the SKR.
    await createSyncResource(acquired, `later-${acquired}`, `later-${acquired}`);
    await waitUntil(
      'the later SyncResource applied to the SKR',
      () => skrConfigMap(`later-${acquired}`),
      60_000,
    );
    await waitUntil('the later SyncResource labelled', async () =>
      bucketLabelled(await list('syncResource')),
    );
    await waitUntil('replica-a caches it', () =>
      (a.controller.syncResourceNames(acquired) ?? []).includes(`later-${acquired}`),
    );
    expect(lost).to.deep.equal([]);
  });
});
