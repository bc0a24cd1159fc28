// What the skr-modules journeys share: the built binary run as a user runs it, and the greeter module they publish.
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const BINARY = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'main.js');

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs skr-modules with `args` in `cwd` (default: this process's). */
export function skrModules(args: string[], cwd?: string): Promise<RunResult> {
  // Through this Node (22, from node_modules): tsc does not mark dist/main.js executable.
  const child = spawn(process.execPath, [BINARY, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The greeter operator's Deployment, running `image`. */
export const greeterOperator = (image: string) => `apiVersion: apps/v1
kind: Deployment
metadata:
  name: greeter-operator
  namespace: greeter-system
spec:
  selector: {matchLabels: {app: greeter}}
  template:
    metadata: {labels: {app: greeter}}
    spec: {containers: [{name: manager, image: "${image}"}]}
`;

export const GREETER_CRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: greeters.operator.kyma-project.io
spec:
  group: operator.kyma-project.io
  names: {kind: Greeter, plural: greeters}
  scope: Namespaced
  versions: [{name: v1alpha1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]
`;

export const GREETER_DEFAULT_CR = `apiVersion: operator.kyma-project.io/v1alpha1
kind: Greeter
metadata:
  name: default
  namespace: kyma-system
spec:
  greeting: hello
`;
