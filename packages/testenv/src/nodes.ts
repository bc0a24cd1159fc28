// One node per cluster: containerd (own root, state and socket), kubelet, kube-proxy, kube-controller-manager
// and kube-scheduler, all inside the cluster's network namespace (run-network.ts). Settings without which
// it does not run on these machines are explained where they are set; see docs/decisions/014-real-nodes.md.
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { CNI_BIN_DIR, type NodeBinaries } from './node-binaries.js';
import { startProcess, type ManagedProcess } from './processes.js';
import { createCgroupRoot, sh, type ClusterNetwork, type RunNetwork } from './run-network.js';

const NODE_READY_TIMEOUT_MS = 120_000;

export interface ClusterNode {
  readonly name: string;
  readonly ip: string;
  readonly containerdSocket: string;
  /** Milliseconds from starting containerd to the Node's Ready condition, for the figures in reports. */
  readonly readyAfterMs: number;
  /** Restarts the kubelet only (pods keep running), as an upgrade or crash would. */
  restartKubelet(): Promise<void>;
  stop(): Promise<void>;
}

export interface NodeOptions {
  plane: string;
  /** The plane's directory; the node keeps everything under `<dir>/node`. */
  dir: string;
  kubeconfigPath: string;
  kubeConfig: KubeConfig;
  caFile: string;
  saPrivateKeyFile: string;
  network: RunNetwork;
  binaries: NodeBinaries;
  /** host:port of the run's registry; containerd pulls from it over plain HTTP. */
  registry: string;
  pauseImage: string;
  log: (line: string) => void;
}

function containerdConfig(root: string, cluster: ClusterNetwork, pauseImage: string): string {
  return `version = 2
root = "${root}/root"
state = "${root}/state"
disabled_plugins = ["io.containerd.internal.v1.tracing", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "${root}/containerd.sock"

[plugins."io.containerd.internal.v1.opt"]
  path = "${root}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${pauseImage}"
  # The sandbox lacks CAP_SYS_RESOURCE: without this every pod fails with "can't get final child's PID".
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "${root}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${CNI_BIN_DIR}"
    conf_dir = "${root}/cni"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "${root}/certs.d"
`;
  void cluster;
}

function cniConfig(cluster: ClusterNetwork, ipamDir: string): string {
  return JSON.stringify(
    {
      cniVersion: '0.4.0',
      name: cluster.name,
      plugins: [
        {
          type: 'bridge',
          bridge: 'cni0',
          isGateway: true,
          ipMasq: true,
          hairpinMode: true,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: cluster.podCidr }]],
            routes: [{ dst: '0.0.0.0/0' }],
            dataDir: ipamDir,
          },
        },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    },
    null,
    2,
  );
}

function kubeletConfig(
  options: NodeOptions,
  cluster: ClusterNetwork,
  dir: string,
  cgroupRoot: string,
): string {
  return `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: ${cluster.nodeIp}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: true }
  x509: { clientCAFile: ${options.caFile} }
authorization: { mode: Webhook }
containerRuntimeEndpoint: unix://${dir}/containerd/containerd.sock
# These machines have cgroup v1 (the kubelet exits without this) and cgroupfs, not systemd.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: ${cgroupRoot}
failSwapOn: false
podCIDR: ${cluster.podCidr}
podLogsDir: ${dir}/pod-logs
volumePluginDir: ${dir}/volume-plugins
# Images come from the run's registry or not at all: never collect them, never re-verify pull credentials
# (an image pulled under another name is otherwise refused as ErrImageNeverPull).
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
imagePullCredentialsVerificationPolicy: NeverVerify
evictionHard: { memory.available: 1Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1% }
# Secret volumes refresh within about a second (60–90 s by default): the CA rotation tests depend on it.
syncFrequency: 1s
serializeImagePulls: false
registerNode: true
maxPods: 50
`;
}

function kubeProxyConfig(options: NodeOptions, cluster: ClusterNetwork, nodeName: string): string {
  return `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: { kubeconfig: ${options.kubeconfigPath} }
mode: iptables
hostnameOverride: ${nodeName}
clusterCIDR: ${cluster.podCidr}
bindAddress: ${cluster.nodeIp}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [${cluster.nodeIp}/32]
# nf_conntrack_max is machine-wide: leave it alone.
conntrack: { maxPerCore: 0, min: 0 }
iptables: { syncPeriod: 10s, minSyncPeriod: 0s }
`;
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number, logFile: string) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const tail = (await readFile(logFile, 'utf8').catch(() => '')).split('\n').slice(-15).join('\n');
  throw new Error(`${what} not ready after ${timeoutMs / 1000} s; last lines of ${logFile}:\n${tail}`);
}

export async function startNode(options: NodeOptions): Promise<ClusterNode> {
  const { plane, network, binaries, log } = options;
  const cluster = network.cluster(plane);
  const nodeName = `${plane}-node`;
  const dir = join(options.dir, 'node');
  const containerdDir = join(dir, 'containerd');
  for (const sub of ['cni', `certs.d/${options.registry}`, 'runc', 'opt']) {
    await mkdir(join(containerdDir, sub), { recursive: true });
  }
  for (const sub of [
    'kubelet',
    'kubelet-certs',
    'pod-logs',
    'volume-plugins',
    'cni-ipam',
    'cm-certs',
    'sched-certs',
  ]) {
    await mkdir(join(dir, sub), { recursive: true });
  }
  await writeFile(
    join(containerdDir, 'containerd.toml'),
    containerdConfig(containerdDir, cluster, options.pauseImage),
  );
  await writeFile(
    join(containerdDir, 'cni', '10-bridge.conflist'),
    cniConfig(cluster, join(dir, 'cni-ipam')),
  );
  // containerd pulls hosts other than localhost over HTTPS unless hosts.toml says otherwise (read per pull).
  await writeFile(
    join(containerdDir, 'certs.d', options.registry, 'hosts.toml'),
    `server = "http://${options.registry}"\n[host."http://${options.registry}"]\n  capabilities = ["pull", "resolve"]\n`,
  );
  const cgroupRoot = createCgroupRoot(cluster.name);
  await writeFile(join(dir, 'kubelet.yaml'), kubeletConfig(options, cluster, dir, cgroupRoot));
  await writeFile(join(dir, 'kube-proxy.yaml'), kubeProxyConfig(options, cluster, nodeName));

  const processes: ManagedProcess[] = [];
  const start = (name: string, binary: string, args: string[]) => {
    const [command, ...argv] = network.inCluster(plane, [binary, ...args]);
    const process = startProcess(command as string, argv, join(dir, `${name}.log`));
    processes.push(process);
    return process;
  };
  const started = Date.now();
  start('containerd', binaries.containerd, ['--config', join(containerdDir, 'containerd.toml')]);
  const controllerManager = start('kube-controller-manager', binaries.kubeControllerManager, [
    `--kubeconfig=${options.kubeconfigPath}`,
    `--authentication-kubeconfig=${options.kubeconfigPath}`,
    `--authorization-kubeconfig=${options.kubeconfigPath}`,
    `--cert-dir=${join(dir, 'cm-certs')}`,
    `--bind-address=127.0.0.1`,
    '--leader-elect=false',
    `--service-account-private-key-file=${options.saPrivateKeyFile}`,
    `--root-ca-file=${options.caFile}`,
    '--use-service-account-credentials=false',
    '--node-monitor-grace-period=20s',
  ]);
  const scheduler = start('kube-scheduler', binaries.kubeScheduler, [
    `--kubeconfig=${options.kubeconfigPath}`,
    `--authentication-kubeconfig=${options.kubeconfigPath}`,
    `--authorization-kubeconfig=${options.kubeconfigPath}`,
    `--cert-dir=${join(dir, 'sched-certs')}`,
    `--bind-address=127.0.0.1`,
    '--leader-elect=false',
  ]);
  const socket = join(containerdDir, 'containerd.sock');
  await waitFor(`containerd ${plane}`, async () => existsSync(socket), 30_000, join(dir, 'containerd.log'));
  const kubeletArgs = [
    `--config=${join(dir, 'kubelet.yaml')}`,
    `--kubeconfig=${options.kubeconfigPath}`,
    `--root-dir=${join(dir, 'kubelet')}`,
    `--cert-dir=${join(dir, 'kubelet-certs')}`,
    `--hostname-override=${nodeName}`,
    `--node-ip=${cluster.nodeIp}`,
    '--v=1',
  ];
  let kubelet = start('kubelet', binaries.kubelet, kubeletArgs);
  const kubeProxy = start('kube-proxy', binaries.kubeProxy, [`--config=${join(dir, 'kube-proxy.yaml')}`]);

  const core = options.kubeConfig.makeApiClient(CoreV1Api);
  const nodeReady = async () => {
    const node = await core.readNode({ name: nodeName });
    return !!node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
  };
  await waitFor(`node ${nodeName}`, nodeReady, NODE_READY_TIMEOUT_MS, join(dir, 'kubelet.log'));
  const readyAfterMs = Date.now() - started;
  // Pods may dial the `kubernetes` ClusterIP only once kube-proxy has written its rule (decision 014).
  await waitFor(
    `kube-proxy ${plane}`,
    async () =>
      sh('nsenter', [
        `--net=${cluster.netnsPath}`,
        '--',
        'iptables',
        '-t',
        'nat',
        '-S',
        'KUBE-SERVICES',
      ]).includes('default/kubernetes:https'),
    NODE_READY_TIMEOUT_MS,
    join(dir, 'kube-proxy.log'),
  );
  log(`[testenv] node ${nodeName} Ready ${readyAfterMs} ms after containerd started (${cluster.nodeIp})`);
  void controllerManager;
  void scheduler;
  void kubeProxy;

  return {
    name: nodeName,
    ip: cluster.nodeIp,
    containerdSocket: socket,
    readyAfterMs,
    async restartKubelet() {
      await kubelet.stop();
      const marker = (await readFile(join(dir, 'kubelet.log'), 'utf8').catch(() => '')).length;
      kubelet = start('kubelet', binaries.kubelet, kubeletArgs);
      // The old Ready=True is still in the API for a moment: wait for the new registration in the log first.
      await waitFor(
        `kubelet ${nodeName} re-registration`,
        async () => {
          const since = (await readFile(join(dir, 'kubelet.log'), 'utf8')).slice(marker);
          return (
            since.includes('Successfully registered node') || since.includes('Node was previously registered')
          );
        },
        NODE_READY_TIMEOUT_MS,
        join(dir, 'kubelet.log'),
      );
      await waitFor(`node ${nodeName}`, nodeReady, NODE_READY_TIMEOUT_MS, join(dir, 'kubelet.log'));
    },
    async stop() {
      // The kubelet first, so it does not restart what the rest of cleanup kills; then the others.
      await kubelet.stop(2000);
      await Promise.all(processes.map((p) => p.stop(2000)));
    },
  };
}
