// A namespace of the shared KCP for one suite: created before its tests (with the project's kinds serving), deleted
// after them.
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { sharedEnvironment } from '@skr-watcher/testenv';
import { untilCrdsServe } from './planes.js';

export interface SuiteNamespace {
  /** Set once the suite's first `before` hook ran. */
  kcp: KubeConfig;
  name: string;
}

/** Call in `describe`; `prefix` and the process id name the namespace. */
export function kcpNamespaceForSuite(prefix: string): SuiteNamespace {
  const suite = { name: `${prefix}-${process.pid}` } as SuiteNamespace;
  before(async () => {
    suite.kcp = (await sharedEnvironment()).plane('kcp').kubeConfig();
    await untilCrdsServe([suite.kcp]);
    await suite.kcp.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: suite.name } } });
  });
  after(async () => {
    await suite.kcp
      ?.makeApiClient(CoreV1Api)
      .deleteNamespace({ name: suite.name })
      .catch(() => {});
  });
  return suite;
}
