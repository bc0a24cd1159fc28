// kubectl for tests that apply the shipped manifests as an operator does (`kubectl apply -k`): built from the Go
// module proxy (../go/kubectl pins k8s.io/kubectl at the control planes' version) into the version-keyed cache.
import { fileURLToPath } from 'node:url';
import { ensureBuilt } from './binaries.js';

const BUILD_SCRIPT = fileURLToPath(new URL('../scripts/build-kubectl.sh', import.meta.url));

/** kubectl's path: KUBEBUILDER_ASSETS, the cache, else a build (reuses kube-apiserver's compiled packages). */
export async function ensureKubectl(options: { log?: (line: string) => void } = {}): Promise<string> {
  const { paths } = await ensureBuilt({
    names: ['kubectl'],
    what: 'kubectl',
    script: BUILD_SCRIPT,
    lockName: '.building-kubectl',
    log: options.log,
  });
  const kubectl = paths['kubectl'];
  if (!kubectl) throw new Error('no kubectl after the build');
  return kubectl;
}
