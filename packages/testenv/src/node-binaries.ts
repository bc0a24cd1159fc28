// What clusters with nodes need: Go binaries from the version-keyed cache (or a build), and Debian's
// containerd, runc, CNI plugins, iptables and buildah from the machine.
import { spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ensureBuilt } from './binaries.js';

const BUILD_SCRIPT = fileURLToPath(new URL('../scripts/build-node-binaries.sh', import.meta.url));

/** Debian's CNI plugins (containernetworking-plugins). */
export const CNI_BIN_DIR = '/usr/lib/cni';

/** What `.ci/run` installs with apt; named in the reason when something is missing. */
export const NODE_APT_PACKAGES =
  'containerd runc containernetworking-plugins iptables iproute2 util-linux buildah busybox-static';

export interface NodeBinaries {
  kubelet: string;
  kubeControllerManager: string;
  kubeScheduler: string;
  kubeProxy: string;
  crane: string;
  registry: string;
  kustomize: string;
  containerd: string;
}

function onPath(command: string): string | undefined {
  const found = spawnSync('sh', ['-c', `command -v ${command}`], { encoding: 'utf8' });
  return found.status === 0 ? found.stdout.trim() : undefined;
}

/**
 * Why this machine cannot run nodes, or undefined when it can. Tests skip with this reason only;
 * anything else that fails later is a failure, not a skip.
 */
export function nodeSupportProblem(): string | undefined {
  if (process.platform !== 'linux') return `nodes need Linux, this is ${process.platform}`;
  if (process.getuid?.() !== 0) return 'nodes need root (containerd, network namespaces, cgroups, mounts)';
  const missing = ['containerd', 'runc', 'iptables', 'ip', 'nsenter', 'buildah', 'busybox'].filter(
    (command) => !onPath(command),
  );
  try {
    accessSync(`${CNI_BIN_DIR}/bridge`, constants.X_OK);
  } catch {
    missing.push(`${CNI_BIN_DIR}/bridge`);
  }
  if (missing.length > 0) {
    return `missing ${missing.join(', ')}; install: apt-get install -y ${NODE_APT_PACKAGES}`;
  }
  return undefined;
}

/** The node binaries: KUBEBUILDER_ASSETS, the cache, else a build (a cold kubelet takes ≈ 16 min). */
export async function ensureNodeBinaries(
  options: { log?: (line: string) => void } = {},
): Promise<NodeBinaries> {
  const { paths } = await ensureBuilt({
    names: [
      'kubelet',
      'kube-controller-manager',
      'kube-scheduler',
      'kube-proxy',
      'crane',
      'registry',
      'kustomize',
    ],
    what: 'the node binaries (kubelet, kube-controller-manager, kube-scheduler, kube-proxy, crane, registry, kustomize)',
    script: BUILD_SCRIPT,
    lockName: '.building-node',
    log: options.log,
  });
  const containerd = onPath('containerd');
  if (!containerd) throw new Error(`containerd is not installed; apt-get install -y ${NODE_APT_PACKAGES}`);
  const path = (name: string) => {
    const found = paths[name];
    if (!found) throw new Error(`no ${name} after the build`);
    return found;
  };
  return {
    kubelet: path('kubelet'),
    kubeControllerManager: path('kube-controller-manager'),
    kubeScheduler: path('kube-scheduler'),
    kubeProxy: path('kube-proxy'),
    crane: path('crane'),
    registry: path('registry'),
    kustomize: path('kustomize'),
    containerd,
  };
}
