// One kube-apiserver of an environment, as tests and the node harness see it (environment.ts starts them).
import type { KubeConfig } from '@kubernetes/client-node';

export interface ControlPlane {
  readonly name: string;
  /** https://127.0.0.1:<port>, or https://<the run bridge's host address>:<port> with nodes. */
  readonly url: string;
  readonly dir: string;
  readonly kubeconfigPath: string;
  /** The plane's CA (PEM): it signed the serving certificate; tests use it as the webhook caBundle too. */
  readonly caPem: string;
  /** A fresh KubeConfig for this plane (cluster, user and context named after the plane). */
  kubeConfig(): KubeConfig;
  /** Stops and starts this kube-apiserver again on the same port and data; for fault tests. */
  restart(): Promise<void>;
  /** Stops the kube-apiserver only (etcd keeps its data). */
  stopApiServer(): Promise<void>;
  startApiServer(): Promise<void>;
  readonly pid: () => number;
}
