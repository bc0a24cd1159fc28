// Real control planes for tests and the demo: one etcd, one kube-apiserver per plane (own etcd prefix).
import { readFile, readdir, mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  ApiextensionsV1Api,
  KubeConfig,
  loadYaml,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';
import { ensureBinaries, type Binaries } from './binaries.js';
import { planeCertificates, type PlaneCertificates } from './pki.js';
import { freePort } from './ports.js';
import { startProcess, type ManagedProcess } from './processes.js';
import { startNodes, type Nodes } from './cluster-nodes.js';
import { createRunNetwork, type RunNetwork } from './run-network.js';
import type { ControlPlane } from './control-plane.js';

export const DEFAULT_CRD_DIR = fileURLToPath(new URL('../../../manifests/crds/', import.meta.url));
// A kube-apiserver is ready in 5-10 s on a quiet machine; on two cores under a load average of 25 (a CI run next to
// other work) one took over 60 s. The bound only catches a start that hangs, so it is generous.
const READY_TIMEOUT_MS = 180_000;
/** Starts of a kube-apiserver that exits before it is ready, before the plane's start fails. */
const START_ATTEMPTS = 3;

class ExitedBeforeReady extends Error {}

/** The fatal line kube-apiserver wrote last (klog's `F` severity), or the log's last line. */
async function fatalLine(logFile: string): Promise<string> {
  const lines = (await readFile(logFile, 'utf8').catch(() => '')).split('\n').filter((line) => line.trim());
  const fatal = lines.findLast((line) => /^F\d{4} /.test(line)) ?? lines.at(-1) ?? 'no log';
  return fatal.length > 300 ? `${fatal.slice(0, 300)}…` : fatal;
}

export interface EnvironmentOptions {
  /** Names of the planes, e.g. ['kcp', 'skr1', 'skr2']. */
  planes: string[];
  /** Where kubeconfigs, certificates, data and logs go; a temporary directory by default. */
  dir?: string;
  /** Directories of CRD manifests to install in every plane; the project's CRDs by default. */
  crdDirs?: string[];
  /**
   * Give every plane a node (containerd, kubelet, kube-proxy, controller-manager, scheduler) and start a
   * registry with the repository's image in it. Needs root and the packages nodeSupportProblem() names.
   */
  nodes?: boolean;
  log?: (line: string) => void;
}

export interface Environment {
  readonly dir: string;
  readonly planes: ControlPlane[];
  plane(name: string): ControlPlane;
  /** PIDs of every etcd and kube-apiserver of this environment that is still running. */
  pids(): number[];
  /** Stops etcd (every API server loses its storage); for fault tests. */
  stopEtcd(): Promise<void>;
  /** Starts etcd again on the same port and data; resolves once it is healthy. */
  startEtcd(): Promise<void>;
  /** With `nodes: true`: the nodes, the registry and the images in it. */
  readonly nodes?: Nodes;
  stop(): Promise<void>;
}

function kubeconfigYaml(name: string, url: string, certs: PlaneCertificates): string {
  const b64 = (text: string) => Buffer.from(text).toString('base64');
  return `apiVersion: v1
kind: Config
clusters:
  - name: ${name}
    cluster:
      server: ${url}
      certificate-authority-data: ${b64(certs.ca.certPem)}
users:
  - name: ${name}-admin
    user:
      client-certificate-data: ${b64(certs.admin.certPem)}
      client-key-data: ${b64(certs.admin.keyPem)}
contexts:
  - name: ${name}
    context:
      cluster: ${name}
      user: ${name}-admin
current-context: ${name}
`;
}

function getStatus(url: string, ca: string): Promise<number> {
  return new Promise((resolve) => {
    const req = request(url, { ca, timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', () => resolve(0));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number, logFile?: string) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const tail = logFile
    ? (await readFile(logFile, 'utf8').catch(() => '')).split('\n').slice(-20).join('\n')
    : '';
  throw new Error(`${what} not ready after ${timeoutMs / 1000} s${tail ? `; last log lines:\n${tail}` : ''}`);
}

async function loadCrds(dirs: string[]): Promise<V1CustomResourceDefinition[]> {
  const crds: V1CustomResourceDefinition[] = [];
  for (const dir of dirs) {
    for (const file of (await readdir(dir)).filter((f) => f.endsWith('.yaml')).sort()) {
      // loadYaml maps `x-kubernetes-*` keys onto client-node's model; a plain YAML parse loses them on the wire.
      crds.push(loadYaml<V1CustomResourceDefinition>(await readFile(join(dir, file), 'utf8')));
    }
  }
  return crds;
}

/** Creates the CRDs in a plane and waits until each is Established. */
export async function installCrds(kubeConfig: KubeConfig, crds: V1CustomResourceDefinition[]): Promise<void> {
  const api = kubeConfig.makeApiClient(ApiextensionsV1Api);
  await Promise.all(crds.map((body) => api.createCustomResourceDefinition({ body })));
  for (const crd of crds) {
    const name = crd.metadata?.name ?? '';
    await waitFor(
      `CRD ${name}`,
      async () => {
        const current = await api.readCustomResourceDefinition({ name });
        return !!current.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
      },
      30_000,
    );
  }
}

export async function startEnvironment(options: EnvironmentOptions): Promise<Environment> {
  const log = options.log ?? (() => {});
  const names = options.planes;
  if (
    names.length === 0 ||
    new Set(names).size !== names.length ||
    names.some((n) => !/^[a-z0-9-]+$/.test(n))
  ) {
    throw new Error(`plane names must be distinct lowercase words, got ${JSON.stringify(names)}`);
  }
  const binaries: Binaries = await ensureBinaries({ log });
  const ownDir = !options.dir;
  const dir = options.dir ?? (await mkdtemp(join(tmpdir(), 'skr-testenv-')));
  await mkdir(dir, { recursive: true });
  const processes: ManagedProcess[] = [];
  // With nodes the API servers listen on the run's bridge, where pods in the clusters' namespaces reach them.
  const network: RunNetwork | undefined = options.nodes ? createRunNetwork(dir, names) : undefined;
  let nodes: Nodes | undefined;

  const etcdPort = await freePort();
  const peerPort = await freePort();
  const etcdLog = join(dir, 'etcd.log');
  const launchEtcd = () =>
    startProcess(
      binaries.etcd,
      [
        `--data-dir=${join(dir, 'etcd-data')}`,
        `--listen-client-urls=http://127.0.0.1:${etcdPort}`,
        `--advertise-client-urls=http://127.0.0.1:${etcdPort}`,
        `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
        `--initial-cluster=default=http://127.0.0.1:${peerPort}`,
        '--unsafe-no-fsync',
        '--log-level=warn',
      ],
      etcdLog,
    );
  let etcd = launchEtcd();
  processes.push(etcd);
  const etcdHealthy = () =>
    waitFor(
      'etcd',
      async () => {
        const res = await fetch(`http://127.0.0.1:${etcdPort}/health`).catch(() => undefined);
        return !!res?.ok;
      },
      READY_TIMEOUT_MS,
      etcdLog,
    );

  const planes: ControlPlane[] = [];
  const stopAll = async () => {
    await nodes?.stop();
    network?.cleanup();
    await Promise.all(planes.map((plane) => plane.stopApiServer()));
    await etcd.stop();
    if (ownDir) await rm(dir, { recursive: true, force: true });
  };

  try {
    await etcdHealthy();
    log(`[testenv] etcd ready on 127.0.0.1:${etcdPort}`);

    const crds = await loadCrds(options.crdDirs ?? [DEFAULT_CRD_DIR]);
    // Start the API servers in parallel: each takes seconds, mostly waiting on its own start-up hooks.
    // Settled, not all: when one fails, the others that started must still be stopped below (a kube-apiserver
    // left running keeps the test process alive for good).
    const starts = await Promise.allSettled(
      names.map((name) =>
        startPlane(name, dir, binaries, `http://127.0.0.1:${etcdPort}`, log, network?.hostIp),
      ),
    );
    for (const start of starts) if (start.status === 'fulfilled') planes.push(start.value);
    const failed = starts.find((start) => start.status === 'rejected');
    if (failed) throw failed.reason;
    await Promise.all(planes.map((plane) => installCrds(plane.kubeConfig(), crds)));
    log(`[testenv] CRDs installed in ${names.join(', ')}`);
    if (network) nodes = await startNodes({ dir, planes, network, log });
  } catch (error) {
    await stopAll();
    throw error;
  }

  return {
    dir,
    planes,
    plane(name) {
      const found = planes.find((p) => p.name === name);
      if (!found) throw new Error(`no plane named ${name}; planes: ${names.join(', ')}`);
      return found;
    },
    pids: () =>
      [etcd, ...planes.map((p) => ({ pid: p.pid(), isRunning: () => p.pid() > 0 }))]
        .filter((p) => p.isRunning())
        .map((p) => p.pid),
    stopEtcd: () => etcd.stop(),
    async startEtcd() {
      if (etcd.isRunning()) return;
      etcd = launchEtcd();
      processes.push(etcd);
      await etcdHealthy();
    },
    nodes,
    stop: stopAll,
  };
}

async function startPlane(
  name: string,
  rootDir: string,
  binaries: Binaries,
  etcdUrl: string,
  log: (line: string) => void,
  /** An address on the run's bridge (clusters with nodes); loopback otherwise. */
  nodeAddress?: string,
): Promise<ControlPlane> {
  const dir = join(rootDir, name);
  await mkdir(dir, { recursive: true });
  const address = nodeAddress ?? '127.0.0.1';
  const certs = planeCertificates(name, nodeAddress ? [nodeAddress] : []);
  const files = {
    ca: join(dir, 'ca.crt'),
    servingCert: join(dir, 'apiserver.crt'),
    servingKey: join(dir, 'apiserver.key'),
    saPublic: join(dir, 'sa.pub'),
    saPrivate: join(dir, 'sa.key'),
    kubeconfig: join(dir, 'kubeconfig'),
    log: join(dir, 'kube-apiserver.log'),
  };
  await writeFile(files.ca, certs.ca.certPem);
  await writeFile(files.servingCert, certs.serving.certPem);
  await writeFile(files.servingKey, certs.serving.keyPem, { mode: 0o600 });
  await writeFile(files.saPublic, certs.serviceAccount.publicPem);
  await writeFile(files.saPrivate, certs.serviceAccount.privatePem, { mode: 0o600 });

  const port = await freePort();
  const url = `https://${address}:${port}`;
  await writeFile(files.kubeconfig, kubeconfigYaml(name, url, certs), { mode: 0o600 });

  const args = [
    `--etcd-servers=${etcdUrl}`,
    `--etcd-prefix=/${name}`,
    `--secure-port=${port}`,
    `--bind-address=${address}`,
    `--advertise-address=${address}`,
    `--cert-dir=${dir}`,
    `--tls-cert-file=${files.servingCert}`,
    `--tls-private-key-file=${files.servingKey}`,
    `--client-ca-file=${files.ca}`,
    '--service-cluster-ip-range=10.0.0.0/24',
    '--allow-privileged=true',
    ...(nodeAddress
      ? [
          // Pods reach this server through the `kubernetes` Service: its endpoint is this address.
          '--endpoint-reconciler-type=lease',
          '--authorization-mode=Node,RBAC',
          '--enable-admission-plugins=NodeRestriction',
          // Webhooks and APIServices given as Services are dialled at the Pod IP (no ClusterIP on the host).
          '--enable-aggregator-routing=true',
          '--kubelet-preferred-address-types=InternalIP',
        ]
      : [
          '--endpoint-reconciler-type=none',
          '--disable-admission-plugins=ServiceAccount',
          '--authorization-mode=RBAC',
        ]),
    `--service-account-issuer=${url}/`,
    `--service-account-key-file=${files.saPublic}`,
    `--service-account-signing-key-file=${files.saPrivate}`,
    '--profiling=false',
  ];
  let apiserver: ManagedProcess | undefined;

  // kube-apiserver ends itself (klog.Fatal) when a start-up hook fails, e.g. the first service IP repair pass failing
  // within its 60 s window on a loaded machine, and leaves the restart to its supervisor (the kubelet, systemd). This is
  // the supervisor: a server that exits before it is ready is started again, twice at most, saying why.
  const start = async () => {
    for (let attempt = 1; ; attempt++) {
      apiserver = startProcess(binaries.kubeApiserver, args, files.log);
      const current = apiserver;
      try {
        await waitFor(
          `kube-apiserver ${name}`,
          async () => {
            if (!current.isRunning()) throw new ExitedBeforeReady(await fatalLine(files.log));
            return (await getStatus(`${url}/readyz`, certs.ca.certPem)) === 200;
          },
          READY_TIMEOUT_MS,
          files.log,
        );
        break;
      } catch (error) {
        if (!(error instanceof ExitedBeforeReady)) throw error;
        const why = `kube-apiserver ${name} exited before it was ready (${error.message}); see ${files.log}`;
        if (attempt === START_ATTEMPTS) throw new Error(why);
        log(`[testenv] ${why}; starting it again`);
      }
    }
    log(`[testenv] ${name} ready at ${url}`);
  };
  const stop = async () => {
    await apiserver?.stop();
  };
  try {
    await start();
  } catch (error) {
    await stop();
    throw error;
  }

  return {
    name,
    url,
    dir,
    kubeconfigPath: files.kubeconfig,
    caPem: certs.ca.certPem,
    kubeConfig() {
      const kc = new KubeConfig();
      kc.loadFromFile(files.kubeconfig);
      return kc;
    },
    restart: async () => {
      await stop();
      await start();
    },
    stopApiServer: stop,
    startApiServer: start,
    pid: () => (apiserver?.isRunning() ? apiserver.pid : -1),
  };
}
