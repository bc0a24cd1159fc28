// The whole system in pods, as users run it: clusters with nodes (testenv), the repository's image built from
// its Dockerfile and served by the run's registry, the agent deployed in KCP from manifests/kcp through
// kustomize under the shipped ServiceAccount and Role, and the webhook that the agent installs in every SKR
// (Deployment, Service, Secret, NetworkPolicy, a ValidatingWebhookConfiguration with a service reference).
// Shared by `npm run demo -- --pods` and test/cluster/.
import { spawnSync } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  AppsV1Api,
  CoreV1Api,
  KubernetesObjectApi,
  type KubeConfig,
  type KubernetesObject,
  type V1Deployment,
  type V1Pod,
} from '@kubernetes/client-node';
import { DEFAULTS } from '@skr-watcher/api';
import { startEnvironment, type ControlPlane, type Environment } from '@skr-watcher/testenv';
import { parseAllDocuments } from 'yaml';
import { initKcpPki } from './kcp-pki.js';
import { watchModuleConfigs, type ModuleConfigWatch } from './module-configs.js';
import { applySamples } from './samples.js';
import { waitFor } from './index.js';

const KCP_MANIFESTS = fileURLToPath(new URL('../../../manifests/kcp/', import.meta.url));
/** The image name manifests/kcp ships with; kustomize replaces it with the run's registry and digest. */
const SHIPPED_IMAGE = 'ghcr.io/example/skr-watcher';
/** The listener as SKR pods reach it: a NodePort on the KCP node (a LoadBalancer in production). */
export const LISTENER_NODE_PORT = 30082;
export const AGENT_DEPLOYMENT = 'skr-agent';
export const WEBHOOK_DEPLOYMENT = 'skr-webhook';

export interface PodSystemOptions {
  dir: string;
  skrs?: string[];
  progress?: (line: string) => void;
  /** Extra flags for `skr-agent run` in the Deployment. */
  agentArgs?: string[];
  /** Agent replicas (manifests/kcp ships two). */
  agentReplicas?: number;
  /** Runs once the clusters and the samples are there, before the agent is deployed; answers more agent flags. */
  prepareAgent?: (env: Environment) => Promise<string[]>;
}

export interface PodSystem {
  env: Environment;
  namespace: string;
  kcp: KubeConfig;
  skrs: ControlPlane[];
  /** host:port of the listener as SKR pods dial it (KCP node IP and NodePort). */
  listenerAddress: string;
  image: string;
  moduleConfigs: ModuleConfigWatch;
  /** Figures of the start, for reports. */
  timings: Record<string, number>;
  agentPods(): Promise<V1Pod[]>;
  webhookPods(skr: string): Promise<V1Pod[]>;
  stop(): Promise<void>;
}

/**
 * Every replica of a Deployment is on the current template and `ready` of them are Ready (default: all). The
 * agent's standby replicas answer /readyz 503 until they lead, so for it one Ready replica is the goal.
 */
export async function deploymentRolledOut(
  kubeConfig: KubeConfig,
  namespace: string,
  name: string,
  ready?: number,
) {
  const deployment: V1Deployment = await kubeConfig
    .makeApiClient(AppsV1Api)
    .readNamespacedDeployment({ name, namespace });
  const want = deployment.spec?.replicas ?? 1;
  const status = deployment.status;
  return (
    (status?.observedGeneration ?? 0) >= (deployment.metadata?.generation ?? 1) &&
    status?.updatedReplicas === want &&
    (status?.readyReplicas ?? 0) >= (ready ?? want) &&
    (status?.replicas ?? 0) === want
  );
}

/** manifests/kcp through kustomize, with an overlay that points it at this run (image, listener exposure). */
async function agentManifests(options: {
  dir: string;
  kustomize: string;
  image: string;
  kcpAddress: string;
  replicas: number;
  agentArgs: string[];
}): Promise<KubernetesObject[]> {
  const [name, digest] = options.image.split('@');
  const overlay = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ${relative(options.dir, KCP_MANIFESTS)}
images:
  - name: ${SHIPPED_IMAGE}
    newName: ${name}
    digest: ${digest}
replicas:
  - name: ${AGENT_DEPLOYMENT}
    count: ${options.replicas}
patches:
  - target: { kind: Service, name: skr-agent-listener }
    patch: |-
      - op: replace
        path: /spec/type
        value: NodePort
      - op: add
        path: /spec/ports/0/nodePort
        value: ${LISTENER_NODE_PORT}
`;
  await writeFile(join(options.dir, 'kustomization.yaml'), overlay);
  const built = spawnSync(options.kustomize, ['build', options.dir], { encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`kustomize build ${options.dir}: ${built.stderr}`);
  return (
    parseAllDocuments(built.stdout)
      .map((document) => document.toJS() as KubernetesObject | null)
      .filter((object): object is KubernetesObject => !!object)
      // The run made the namespace before the agent's PKI went into it.
      .filter((object) => object.kind !== 'Namespace')
      .map((object) => {
        if (object.kind !== 'Deployment' || object.metadata?.name !== AGENT_DEPLOYMENT) return object;
        // Flags that name this run: where SKR webhooks dial the listener, and which image they run.
        const deployment = object as V1Deployment;
        for (const container of deployment.spec?.template.spec?.containers ?? []) {
          if (container.name !== 'agent') continue;
          container.args = [
            ...(container.args ?? []).map((arg) =>
              arg.startsWith('--skr-webhook-kcp-address=')
                ? `--skr-webhook-kcp-address=${options.kcpAddress}`
                : arg.startsWith('--skr-webhook-image=')
                  ? `--skr-webhook-image=${options.image}`
                  : arg,
            ),
            ...options.agentArgs,
          ];
        }
        return deployment as KubernetesObject;
      })
  );
}

export async function startPodSystem(options: PodSystemOptions): Promise<PodSystem> {
  const skrNames = options.skrs ?? ['skr1'];
  const progress = options.progress ?? (() => {});
  const namespace = DEFAULTS.kcpNamespace;
  const timings: Record<string, number> = {};
  const started = Date.now();
  await mkdir(options.dir, { recursive: true });
  progress(`starting clusters with nodes: kcp, ${skrNames.join(', ')}; building the image`);
  const env = await startEnvironment({
    planes: ['kcp', ...skrNames],
    dir: join(options.dir, 'planes'),
    nodes: true,
    log: progress,
  });
  const stops: (() => Promise<void>)[] = [() => env.stop()];
  const stop = async () => {
    for (const step of stops.splice(0).reverse()) await step().catch(() => undefined);
  };
  try {
    const nodes = env.nodes;
    if (!nodes) throw new Error('the environment started without nodes');
    timings['clusters and image'] = (Date.now() - started) / 1000;
    for (const plane of env.planes)
      timings[`${plane.name} node Ready`] = nodes.node(plane.name).readyAfterMs / 1000;
    Object.assign(timings, nodes.images.timings);

    const kcpPlane = env.plane('kcp');
    const kcp = kcpPlane.kubeConfig();
    const kcpNodeIp = nodes.node('kcp').ip;
    const listenerAddress = `${kcpNodeIp}:${LISTENER_NODE_PORT}`;
    const core = kcp.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    for (const skr of skrNames) {
      await env
        .plane(skr)
        .kubeConfig()
        .makeApiClient(CoreV1Api)
        .createNamespace({ body: { metadata: { name: DEFAULTS.skrNamespace } } });
    }
    progress('creating the KCP CA and the listener certificate for the KCP node address');
    await initKcpPki(kcp, namespace, {
      dnsNames: [`skr-agent-listener.${namespace}.svc`],
      ipAddresses: [kcpNodeIp],
    });
    progress(
      'applying the samples: module catalog, Watcher, a Kyma and kubeconfig Secret per SKR (in-cluster webhooks)',
    );
    await applySamples(
      kcp,
      await Promise.all(
        skrNames.map(async (name) => ({
          name,
          kubeconfig: await readFile(env.plane(name).kubeconfigPath, 'utf8'),
        })),
      ),
      namespace,
    );

    progress(`deploying the agent from manifests/kcp (kustomize) with image ${nodes.images.app}`);
    const overlayDir = join(options.dir, 'kcp-overlay');
    await mkdir(overlayDir, { recursive: true });
    const objects = await agentManifests({
      dir: overlayDir,
      kustomize: nodes.kustomize,
      image: nodes.images.app,
      kcpAddress: listenerAddress,
      replicas: options.agentReplicas ?? 2,
      agentArgs: [
        ...(options.agentArgs ?? []),
        ...(options.prepareAgent ? await options.prepareAgent(env) : []),
      ],
    });
    await writeFile(join(overlayDir, 'built.yaml'), objects.map((o) => JSON.stringify(o)).join('\n---\n'));
    const objectApi = KubernetesObjectApi.makeApiClient(kcp);
    for (const object of objects) await objectApi.create(object);
    const deployed = Date.now();
    await waitFor(
      `Deployment ${namespace}/${AGENT_DEPLOYMENT} rolled out`,
      () => deploymentRolledOut(kcp, namespace, AGENT_DEPLOYMENT, 1),
      Date.now() + 240_000,
    );
    timings['agent Deployment Ready'] = (Date.now() - deployed) / 1000;

    const moduleConfigs = watchModuleConfigs(kcp, namespace);
    stops.push(() => moduleConfigs.stop());
    for (const skr of skrNames) {
      progress(
        `${skr}: waiting for the webhook Deployment the agent installs, and the sample's ModuleConfig`,
      );
      const skrConfig = env.plane(skr).kubeConfig();
      await waitFor(
        `${skr}: Deployment ${DEFAULTS.skrNamespace}/${WEBHOOK_DEPLOYMENT} rolled out`,
        () => deploymentRolledOut(skrConfig, DEFAULTS.skrNamespace, WEBHOOK_DEPLOYMENT),
        Date.now() + 240_000,
      );
      await waitFor(
        `${skr}: ModuleConfig of the sample module in KCP`,
        async () => moduleConfigs.current(skr, 'sample') !== undefined,
        Date.now() + 120_000,
      );
    }
    timings['system ready'] = (Date.now() - started) / 1000;
    const podsOf = async (kubeConfig: KubeConfig, ns: string, app: string) =>
      (
        await kubeConfig
          .makeApiClient(CoreV1Api)
          .listNamespacedPod({ namespace: ns, labelSelector: `app.kubernetes.io/name=${app}` })
      ).items;
    return {
      env,
      namespace,
      kcp,
      skrs: skrNames.map((name) => env.plane(name)),
      listenerAddress,
      image: nodes.images.app,
      moduleConfigs,
      timings,
      agentPods: () => podsOf(kcp, namespace, AGENT_DEPLOYMENT),
      webhookPods: (skr) => podsOf(env.plane(skr).kubeConfig(), DEFAULTS.skrNamespace, WEBHOOK_DEPLOYMENT),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
