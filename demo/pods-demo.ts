// `npm run demo -- --pods`: the same journey as the process demo, with the agent and the webhook in Pods on
// real nodes (demo/pods.ts). Slower to start (nodes, image build); the process demo stays the default.
import { CustomObjectsApi } from '@kubernetes/client-node';
import { mergePatchCustomObject } from '@skr-watcher/kube';
import { nodeSupportProblem } from '@skr-watcher/testenv';
import { startPodSystem, type PodSystem } from './pods.js';
import { SAMPLE_MODULE } from './system.js';

const print = (line = '') => process.stdout.write(`${line}\n`);

export async function podsDemo(options: {
  dir: string;
  once: boolean;
  editTimeoutMs: number;
}): Promise<number> {
  const problem = nodeSupportProblem();
  if (problem) {
    print(`demo --pods cannot run on this machine: ${problem}`);
    return 1;
  }
  const started = Date.now();
  const elapsed = () => `[${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s]`;
  let system: PodSystem | undefined;
  let interrupted: (() => void) | undefined;
  const interruption = new Promise<void>((resolve) => (interrupted = resolve));
  const onSignal = () => {
    if (!system) process.exit(130); // testenv's exit hook undoes the host changes
    print('\nstopping the clusters...');
    interrupted?.();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    system = await startPodSystem({ dir: options.dir, progress: (line) => print(`${elapsed()} ${line}`) });
    print(`${elapsed()} ready; start-up (s): ${JSON.stringify(system.timings)}`);
    const { module: _module, ...ref } = SAMPLE_MODULE;
    const greeting = `hello from the pods demo at ${new Date().toISOString()}`;
    const sent = Date.now();
    await mergePatchCustomObject(system.env.plane('skr1').kubeConfig().makeApiClient(CustomObjectsApi), ref, {
      spec: { greeting },
    });
    const arrived = await new Promise<number | undefined>((resolve) => {
      const timer = setTimeout(() => resolve(undefined), options.editTimeoutMs);
      const check = () => {
        if (system?.moduleConfigs.current('skr1', 'sample')?.spec['greeting'] === greeting) {
          clearTimeout(timer);
          resolve(Date.now() - sent);
        } else setTimeout(check, 20);
      };
      check();
    });
    if (arrived === undefined) {
      print(`demo failed: the edit did not reach the ModuleConfig within ${options.editTimeoutMs / 1000} s`);
      return 1;
    }
    print(`edit in skr1 → webhook Pod → agent Pod → ModuleConfig in KCP: ${arrived} ms`);
    const kcp = `kubectl --kubeconfig ${system.env.plane('kcp').kubeconfigPath}`;
    const skr = `kubectl --kubeconfig ${system.env.plane('skr1').kubeconfigPath}`;
    print('Try:');
    print(`  ${kcp} -n ${system.namespace} get pods -o wide`);
    print(`  ${skr} -n kyma-system get deploy,svc,pods,networkpolicy -o wide`);
    print(`  ${skr} get validatingwebhookconfiguration skr-webhook -o yaml`);
    if (options.once) return 0;
    print('Ctrl-C stops everything.');
    await interruption;
    return 0;
  } finally {
    await system?.stop();
  }
}
