// The network of one run with nodes: a bridge of the run's own on the host (10.X.0.1/24; API servers and the
// registry listen there), and per cluster a network namespace joined to it by a veth (node IP 10.X.0.(10+i))
// in which that cluster's containerd, kubelet, kube-proxy, controller-manager and scheduler run.
// Why namespaces: two kube-proxies in one namespace rewrite each other's chains; and with no default route
// inside, a ClusterIP that kube-proxy does not serve yet is unreachable instead of answered by the
// machine's egress proxy. Every change is registered under /run/skr-testenv so cleanup-nodes.sh can undo
// it even after this process was killed.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync, appendFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const CLEANUP_SCRIPT = fileURLToPath(new URL('../scripts/cleanup-nodes.sh', import.meta.url));
export const HOST_STATE_DIR = '/run/skr-testenv';

/** Machine-wide kernel settings the kubelet changes at start (container manager "kernel tunables"). */
const KUBELET_SYSCTLS = [
  'vm.overcommit_memory',
  'vm.panic_on_oom',
  'kernel.panic',
  'kernel.panic_on_oops',
  'kernel.keys.root_maxkeys',
  'kernel.keys.root_maxbytes',
];

/** Paths the kubelet, CNI and containerd shims create outside any directory their flags name. */
const CREATED_OUTSIDE = {
  removeWhenLastRunEnds: ['/var/lib/kubelet'],
  removeIfEmpty: [
    '/var/log/containers',
    '/var/lib/cni/results',
    '/var/lib/cni',
    '/run/containerd/s',
    '/run/containerd',
  ],
};

export interface ClusterNetwork {
  readonly plane: string;
  /** `skrw<run>-<plane>`: network namespace, CNI network and cgroup root share it. */
  readonly name: string;
  readonly netnsPath: string;
  readonly nodeIp: string;
  readonly podCidr: string;
}

export interface RunNetwork {
  readonly id: string;
  /** The host's address on the run's bridge: API servers and the registry bind here. */
  readonly hostIp: string;
  readonly clusters: ClusterNetwork[];
  cluster(plane: string): ClusterNetwork;
  /** Argv prefix that runs a command inside a cluster's network namespace (mount namespace unchanged). */
  inCluster(plane: string, argv: string[]): string[];
  /** Undoes every host change of this run; synchronous so it also runs from an 'exit' handler. */
  cleanup(): void;
}

export function sh(command: string, args: string[]): string {
  const result = spawnSync(command, args, { encoding: 'utf8' });
  if (result.error || result.status !== 0) {
    throw new Error(
      `${command} ${args.join(' ')} failed: ${(result.stderr || String(result.error)).trim()}`,
      {
        cause: result.error,
      },
    );
  }
  return result.stdout;
}

/** Runs cleanup-nodes.sh (a run id, `--stale` or `--check`); synchronous so it also works in 'exit' handlers. */
export function runCleanupScript(arg: string): { output: string; status: number } {
  const result = spawnSync('bash', [CLEANUP_SCRIPT, arg], { encoding: 'utf8' });
  return { output: `${result.stdout}${result.stderr}`, status: result.status ?? 1 };
}

function readSysctl(key: string): string | undefined {
  try {
    return readFileSync(`/proc/sys/${key.replaceAll('.', '/')}`, 'utf8')
      .trim()
      .replace(/\s+/g, ' ');
  } catch {
    return undefined;
  }
}

/** Records what the first concurrent run found, so the last one restores it. */
function recordHostState(): void {
  mkdirSync(`${HOST_STATE_DIR}/runs`, { recursive: true });
  mkdirSync(`${HOST_STATE_DIR}/nets`, { recursive: true });
  const orig = `${HOST_STATE_DIR}/sysctl.orig`;
  if (!existsSync(orig)) {
    const lines = KUBELET_SYSCTLS.flatMap((key) => {
      const value = readSysctl(key);
      return value === undefined ? [] : [`${key} ${value}`];
    });
    writeFileSync(orig, lines.join('\n') + '\n');
  }
  const remember = (file: string, paths: string[]) => {
    const listed = existsSync(file) ? readFileSync(file, 'utf8').split('\n') : [];
    for (const path of paths)
      if (!existsSync(path) && !listed.includes(path)) appendFileSync(file, path + '\n');
  };
  remember(`${HOST_STATE_DIR}/created`, CREATED_OUTSIDE.removeWhenLastRunEnds);
  remember(`${HOST_STATE_DIR}/created-if-empty`, CREATED_OUTSIDE.removeIfEmpty);
}

/** A 10.X.0.0/16 no interface or route of this machine uses, claimed atomically against concurrent runs. */
function claimSubnet(): number {
  const routes = sh('ip', ['-4', 'route', 'show', 'table', 'all']) + sh('ip', ['-4', '-br', 'addr']);
  const candidates = Array.from({ length: 100 }, (_, i) => 100 + i).sort(() => Math.random() - 0.5);
  for (const x of candidates) {
    if (routes.includes(`10.${x}.`)) continue;
    try {
      mkdirSync(`${HOST_STATE_DIR}/nets/${x}`);
      return x;
    } catch {
      // Claimed by a concurrent run.
    }
  }
  throw new Error('no free 10.X.0.0/16 for the run network (10.100–10.199 all in use)');
}

export function createRunNetwork(dir: string, planes: string[]): RunNetwork {
  // Runs whose owner died (SIGKILL, OOM) are swept first: their names and subnets are then free again.
  runCleanupScript('--stale');
  recordHostState();
  const id = randomBytes(3).toString('hex');
  const subnet = claimSubnet();
  const hostIp = `10.${subnet}.0.1`;
  const bridge = `skrw${id}`;
  writeFileSync(
    `${HOST_STATE_DIR}/runs/${id}`,
    `pid=${process.pid}\ndir='${dir}'\nsubnet=${subnet}\nplanes='${planes.join(' ')}'\n`,
  );
  const clusters: ClusterNetwork[] = planes.map((plane, index) => ({
    plane,
    name: `skrw${id}-${plane}`,
    netnsPath: `/run/netns/skrw${id}-${plane}`,
    nodeIp: `10.${subnet}.0.${10 + index}`,
    podCidr: `10.${subnet}.${10 + index}.0/24`,
  }));
  const network: RunNetwork = {
    id,
    hostIp,
    clusters,
    cluster(plane) {
      const found = clusters.find((c) => c.plane === plane);
      if (!found) throw new Error(`no node network for plane ${plane}`);
      return found;
    },
    inCluster: (plane, argv) => ['nsenter', `--net=${network.cluster(plane).netnsPath}`, '--', ...argv],
    cleanup: () => {
      if (cleaned) return;
      cleaned = true;
      process.removeListener('exit', network.cleanup);
      runCleanupScript(id);
    },
  };
  let cleaned = false;
  // After SIGINT/SIGTERM processes.ts kills the children and exits; this then undoes the host changes.
  process.on('exit', network.cleanup);
  try {
    sh('ip', ['link', 'add', bridge, 'type', 'bridge']);
    sh('ip', ['addr', 'add', `${hostIp}/24`, 'dev', bridge]);
    sh('ip', ['link', 'set', bridge, 'up']);
    clusters.forEach((cluster, index) => {
      const ns = cluster.name;
      const hostSide = `vs${id}${index}`;
      const inNs = (args: string[]) => sh('ip', ['netns', 'exec', ns, ...args]);
      sh('ip', ['netns', 'add', ns]);
      sh('ip', ['link', 'add', hostSide, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
      sh('ip', ['link', 'set', hostSide, 'master', bridge, 'up']);
      sh('ip', ['-n', ns, 'addr', 'add', `${cluster.nodeIp}/24`, 'dev', 'eth0']);
      sh('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
      sh('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
      // Pods reach other clusters' nodes and the host through this namespace: it routes, and kube-proxy's
      // DNAT must see bridged pod-to-pod traffic.
      inNs(['sysctl', '-qw', 'net.ipv4.ip_forward=1']);
      if (existsSync('/proc/sys/net/bridge')) inNs(['sysctl', '-qw', 'net.bridge.bridge-nf-call-iptables=1']);
      // The API server calls webhook Pods at their Pod IPs (aggregator routing).
      sh('ip', ['route', 'add', cluster.podCidr, 'via', cluster.nodeIp]);
    });
  } catch (error) {
    network.cleanup();
    throw new Error(`creating the run network ${bridge}`, { cause: error });
  }
  return network;
}

/** Creates a cluster's cgroup root in every v1 hierarchy (the kubelet refuses a cgroupRoot that is missing). */
export function createCgroupRoot(name: string): string {
  for (const controller of readdirSync('/sys/fs/cgroup')) {
    const base = `/sys/fs/cgroup/${controller}`;
    if (controller === 'unified' || !existsSync(`${base}/cgroup.procs`)) continue;
    mkdirSync(`${base}/${name}`, { recursive: true });
    if (controller === 'cpuset') {
      // A new cpuset cgroup starts with no CPUs and no memory nodes; nothing can run in it until set.
      for (const file of ['cpuset.cpus', 'cpuset.mems']) {
        writeFileSync(`${base}/${name}/${file}`, readFileSync(`${base}/${file}`, 'utf8'));
      }
    }
  }
  return `/${name}`;
}
