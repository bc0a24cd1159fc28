// `npm run demo -- --pods`: the same journey as the process demo, with the agent and the webhook in Pods on
// real nodes (test/support/system/pods.ts). Slower to start (nodes, image build); the process demo stays the default.
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { mergePatchCustomObject } from '@skr-watcher/kube';
import { nodeSupportProblem, runCleanupScript } from '@skr-watcher/testenv';
import { DEFAULTS } from '@skr-watcher/api';
import {
  formatModuleTimeline,
  moduleObjectsIn,
  operatorPods,
  timeModuleInstall,
} from '../test/support/system/module-timeline.js';
import {
  agentInstallsModules,
  createCatalog,
  GREETER,
  greeterModule,
  publishModules,
  sampleModules,
} from '../test/support/system/modules.js';
import { startPodSystem, type PodSystem } from '../test/support/system/pods.js';
import { SAMPLE_MODULE } from '../test/support/system/index.js';

const print = (line = '') => process.stdout.write(`${line}\n`);

const PODS_MARKER = '.skr-watcher-pods-demo';

/** Mount points at or below `dir` (kubelet volumes, netns files of a run that did not stop). */
async function mountsUnder(dir: string): Promise<string[]> {
  const table = await readFile('/proc/self/mountinfo', 'utf8').catch(() => '');
  return table
    .split('\n')
    .map((line) => line.split(' ')[4]?.replace(/\\040/g, ' '))
    .filter((target): target is string => !!target && (target === dir || target.startsWith(`${dir}/`)));
}

/**
 * Empties the pods demo's directory for a new run (an earlier run's etcd data would otherwise come back). Never
 * while the run that wrote it is alive, and never through a mount: mounts left by a run that was killed are undone
 * by testenv's cleanup first, and if any remain the run stops with what to do.
 */
export async function claimPodsDir(dir: string): Promise<string | undefined> {
  const pid = Number(
    /^pid (\d+)$/m.exec(await readFile(join(dir, PODS_MARKER), 'utf8').catch(() => ''))?.[1],
  );
  if (Number.isInteger(pid) && pid > 0 && pid !== process.pid) {
    try {
      process.kill(pid, 0);
      return `${dir} belongs to a pods demo that is still running (pid ${pid}); stop it or choose another --dir`;
    } catch {
      // That run has ended.
    }
  }
  if ((await mountsUnder(dir)).length > 0) runCleanupScript('--stale');
  const left = await mountsUnder(dir);
  if (left.length > 0) {
    return `${dir} still has mounts of an earlier run (${left.slice(0, 3).join(', ')}${left.length > 3 ? ', …' : ''}); run \`npx skr-testenv cleanup\` or choose another --dir`;
  }
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  await writeFile(
    join(dir, PODS_MARKER),
    `scratch directory of the pods demo; emptied on each run\npid ${process.pid}\n`,
  );
  return undefined;
}

export async function podsDemo(options: {
  dir: string;
  once: boolean;
  editTimeoutMs: number;
  moduleTimeoutMs: number;
}): Promise<number> {
  const problem = nodeSupportProblem();
  if (problem) {
    print(`demo --pods cannot run on this machine: ${problem}`);
    return 1;
  }
  const refused = await claimPodsDir(options.dir);
  if (refused) {
    print(`demo --pods cannot start: ${refused}`);
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
    const progress = (line: string) => print(`${elapsed()} ${line}`);
    const modules = agentInstallsModules();
    let registryHost: string | undefined;
    system = await startPodSystem({
      dir: options.dir,
      progress,
      // Modules come from the run's registry (the one kubelets pull the image from); the operator runs that image.
      ...(modules
        ? {
            prepareAgent: async (env) => {
              const nodes = env.nodes;
              if (!nodes) return [];
              registryHost = `http://${nodes.registry}`;
              progress(
                `publishing modules greeter ${GREETER.version} (operator image ${nodes.images.app}) and sample to ${registryHost}`,
              );
              const [greeter] = await publishModules(registryHost, [
                greeterModule({ operatorImage: nodes.images.app }),
                ...sampleModules(),
              ]);
              if (greeter) await createCatalog(env.plane('kcp').kubeConfig(), DEFAULTS.kcpNamespace, greeter);
              return [`--oci-registry-host=${registryHost}`];
            },
          }
        : {}),
    });
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
    print();
    print(`Module installation: greeter ${GREETER.version} from ${registryHost ?? 'the run registry'}`);
    if (!modules) {
      print('  not available: this skr-agent has no --oci-registry-host; nothing was enabled or timed.');
    } else {
      const skrConfig = system.env.plane('skr1').kubeConfig();
      const timeline = await timeModuleInstall({
        kcp: system.kcp,
        skrConfig,
        namespace: system.namespace,
        skr: 'skr1',
        timeoutMs: options.moduleTimeoutMs,
      });
      print(
        'Timeline (Ready: every workload of the module available, here its operator Pod on the skr1 node):',
      );
      for (const line of formatModuleTimeline(timeline)) print(line);
      if (timeline.readyAtMs === undefined || timeline.kymaReadyAtMs === undefined) {
        print(
          `demo failed: module ${GREETER.module} was not Ready within ${options.moduleTimeoutMs / 1000} s (Manifest state: ${timeline.lastState ?? 'no Manifest'})`,
        );
        return 1;
      }
      print(
        `Module enabled → Manifest Ready (operator available): ${timeline.readyAtMs - timeline.sentAtMs} ms`,
      );
      print(`In skr1 now: ${(await moduleObjectsIn(skrConfig)).join(', ')}`);
      for (const line of await operatorPods(skrConfig)) print(`  ${line}`);
    }
    print();
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
