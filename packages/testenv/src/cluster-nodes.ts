// Nodes for every plane of an environment, the run's registry, and the repository's image in it.
import { join } from 'node:path';
import type { ControlPlane } from './control-plane.js';
import { buildAndPushImages, type BuiltImages } from './images.js';
import { ensureNodeBinaries } from './node-binaries.js';
import { startNode, type ClusterNode } from './nodes.js';
import { startProcess, type ManagedProcess } from './processes.js';
import { freePort } from './ports.js';
import type { RunNetwork } from './run-network.js';

export interface Nodes {
  readonly network: RunNetwork;
  /** host:port of the registry on the run's bridge (plain HTTP), shared by all clusters. */
  readonly registry: string;
  readonly images: BuiltImages;
  readonly kustomize: string;
  node(plane: string): ClusterNode;
  stop(): Promise<void>;
}

async function startRegistry(dir: string, network: RunNetwork, registryBinary: string) {
  const port = await freePort();
  const address = `${network.hostIp}:${port}`;
  const process = startProcess(
    registryBinary,
    [`-address=${address}`, `-dir=${join(dir, 'registry')}`],
    join(dir, 'registry.log'),
  );
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const res = await fetch(`http://${address}/v2/`).catch(() => undefined);
    if (res?.ok) return { address, process };
    if (!process.isRunning()) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`the registry did not answer on ${address}; see ${join(dir, 'registry.log')}`);
}

export async function startNodes(options: {
  dir: string;
  planes: ControlPlane[];
  network: RunNetwork;
  log: (line: string) => void;
}): Promise<Nodes> {
  const { dir, planes, network, log } = options;
  const binaries = await ensureNodeBinaries({ log });
  const registry = await startRegistry(dir, network, binaries.registry);
  const processes: ManagedProcess[] = [registry.process];
  const started: ClusterNode[] = [];
  const stop = async () => {
    await Promise.all(started.map((node) => node.stop()));
    network.cleanup();
    await Promise.all(processes.map((p) => p.stop()));
  };
  try {
    // containerd pulls the pause image at the first pod, so nodes start while the images build.
    const pauseImage = `${registry.address}/pause:1`;
    const [images] = await Promise.all([
      buildAndPushImages(registry.address, log),
      ...planes.map(async (plane) => {
        started.push(
          await startNode({
            plane: plane.name,
            dir: plane.dir,
            kubeconfigPath: plane.kubeconfigPath,
            kubeConfig: plane.kubeConfig(),
            caFile: join(plane.dir, 'ca.crt'),
            saPrivateKeyFile: join(plane.dir, 'sa.key'),
            network,
            binaries,
            registry: registry.address,
            pauseImage,
            log,
          }),
        );
      }),
    ]);
    return {
      network,
      registry: registry.address,
      images,
      kustomize: binaries.kustomize,
      node(plane) {
        const found = started.find((node) => node.name === `${plane}-node`);
        if (!found) throw new Error(`no node for plane ${plane}`);
        return found;
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
