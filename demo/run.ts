// `npm run demo`: the whole path on this machine. A KCP and two SKR control planes, the agent, one webhook
// per SKR registered by the agent; then a scripted Module CR edit in SKR 1 with its measured timeline, and
// (without --once) live events and kubectl commands to try until Ctrl-C.
import { resolve } from 'node:path';
import { Command, InvalidArgumentError, Option } from 'commander';
import { CoreV1Api, RbacAuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, KINDS, parseDuration, TIMER_MAX_MS } from '@skr-watcher/api';
import { freePort } from '@skr-watcher/testenv';
import { podsDemo } from './pods-demo.js';
import { connectLiveEvents, formatLiveEvent, type LiveEvents } from '../test/support/system/live-events.js';
import {
  DRIFT_KEY,
  formatDriftTimeline,
  timeDriftRevert,
  watchConfigMap,
} from '../test/support/system/drift-timeline.js';
import { buildGoManager, timeRoundTrip } from '../test/support/system/sample-manager.js';
import {
  formatModuleTimeline,
  moduleObjectsIn,
  timeModuleInstall,
} from '../test/support/system/module-timeline.js';
import { GREETER } from '../test/support/system/modules.js';
import {
  SAMPLE_MODULE,
  ScratchDirError,
  startLocalSystem,
  waitFor,
  type LocalSystem,
} from '../test/support/system/index.js';
import { EdgeObservations } from '../test/support/system/observations.js';
import { formatTimeline, timeEdit } from './timeline.js';

interface DemoOptions {
  once: boolean;
  /** Which sample module manager runs: examples/sample-manager (ts) or examples/go-manager (go). */
  manager: 'ts' | 'go';
  dir: string;
  timeout: number;
  editTimeout: number;
  moduleTimeout: number;
}

/** A duration option, in the grammar of every other duration flag (`parseDuration`: 90s, 3m, 1m30s). */
function duration(raw: string): number {
  try {
    return parseDuration(raw.trim(), TIMER_MAX_MS);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

const print = (line = '') => process.stdout.write(`${line}\n`);

/** The console's viewer: a ServiceAccount that may read Kymas in the demo's KCP namespace, nothing else. */
const CONSOLE_VIEWER = 'console-viewer';

/** A token of CONSOLE_VIEWER (TokenRequest), for opening the console as an on-call engineer would. */
async function consoleViewerToken(kcp: KubeConfig, namespace: string): Promise<string> {
  const core = kcp.makeApiClient(CoreV1Api);
  const rbac = kcp.makeApiClient(RbacAuthorizationV1Api);
  await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: CONSOLE_VIEWER } } });
  await rbac.createNamespacedRole({
    namespace,
    body: {
      metadata: { name: CONSOLE_VIEWER },
      rules: [{ apiGroups: [GROUP], resources: [KINDS.kyma.plural], verbs: ['get', 'list', 'watch'] }],
    },
  });
  await rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name: CONSOLE_VIEWER },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: CONSOLE_VIEWER },
      subjects: [{ kind: 'ServiceAccount', name: CONSOLE_VIEWER, namespace }],
    },
  });
  const issued = await core.createNamespacedServiceAccountToken({
    name: CONSOLE_VIEWER,
    namespace,
    body: { spec: { audiences: [], expirationSeconds: 24 * 3600 } },
  });
  const token = issued.status?.token;
  if (!token) throw new Error(`TokenRequest for ${namespace}/${CONSOLE_VIEWER} answered without a token`);
  return token;
}

function tryThis(system: LocalSystem, fleetConsole: { url: string }): string[] {
  const [skr1, skr2] = system.skrs;
  const kcp = `kubectl --kubeconfig ${system.kcpKubeconfigPath}`;
  const skr = (s: typeof skr1) => `kubectl --kubeconfig ${s?.kubeconfigPath}`;
  const lines = [
    'Try (live events appear below as the callbacks arrive):',
    `  # edit the Module CR in ${skr1?.name}; its ModuleConfig in KCP follows within milliseconds`,
    `  ${skr(skr1)} -n ${SAMPLE_MODULE.namespace} patch ${SAMPLE_MODULE.plural}.${SAMPLE_MODULE.group} ${SAMPLE_MODULE.name} --type merge -p '{"spec":{"greeting":"hi from kubectl"}}'`,
    `  ${kcp} -n ${system.namespace} get moduleconfigs -o custom-columns=NAME:.metadata.name,KYMA:.spec.kyma,GREETING:.spec.resource.spec.greeting`,
    '  # sample-manager renders the edit into a SyncResource; the agent applies its ConfigMap in the same SKR',
    `  ${kcp} -n ${system.namespace} get syncresources -l operator.kyma-project.io/managed-by=sample-manager`,
    `  ${skr(skr1)} -n kyma-system get configmap sample-config -o jsonpath='{.data.greeting}{"\\n"}'`,
    '  # what the agent registered in the SKR, and the Kymas with their state',
    `  ${skr(skr1)} get validatingwebhookconfiguration skr-webhook -o yaml`,
    `  ${kcp} -n ${system.namespace} get kymas`,
    `  npx kubectl-skr status --kubeconfig ${system.kcpKubeconfigPath} -n ${system.namespace}`,
  ];
  if (system.modules) {
    lines.push(
      '  # modules: what the registry holds, the Manifests in KCP and what they installed',
      `  npx skr-modules inspect ${system.modules.registryHost} ${GREETER.ocmComponentName}:${GREETER.version}`,
      `  ${kcp} -n ${system.namespace} get manifests`,
      `  ${skr(skr1)} -n ${GREETER.namespace} get ${GREETER.plural}.${GREETER.group},configmap/${GREETER.configMap}`,
    );
  }
  if (skr2) {
    lines.push(
      `  # the same in ${skr2.name}: only its own ModuleConfig changes`,
      `  ${skr(skr2)} -n ${SAMPLE_MODULE.namespace} patch ${SAMPLE_MODULE.plural}.${SAMPLE_MODULE.group} ${SAMPLE_MODULE.name} --type merge -p '{"spec":{"replicas":3}}'`,
    );
  }
  lines.push(
    `  # the read-only fleet console in a browser (the token link signs in once; ${CONSOLE_VIEWER} may only read Kymas)`,
    `  ${fleetConsole.url}`,
    '  # the live events in another terminal (from the repository root)',
    `  npx skr-agent events --address 127.0.0.1:${system.agentEventsPort}`,
    '  # metrics',
    `  curl -s http://127.0.0.1:${system.agentMetricsPort}/metrics | grep ^skr_agent_`,
    ...system.skrs.map(
      (s) => `  curl -s http://127.0.0.1:${s.webhookMetricsPort}/metrics | grep ^skr_webhook_events`,
    ),
    `Logs: ${system.agent.logFile}, ${system.skrs.map((s) => s.webhook.logFile).join(', ')}${system.manager ? `, ${system.manager.child.logFile}` : ''}`,
    `Event stream: ${system.eventsUrl}`,
  );
  return lines;
}

/**
 * Enables the greeter module in `skr` and prints its way to Ready. 'unavailable' when this skr-agent cannot install
 * modules yet (said so, nothing timed); 'failed' when it can and the module did not get Ready in time.
 */
async function installModule(
  system: LocalSystem,
  observations: EdgeObservations,
  skr: string,
  timeoutMs: number,
): Promise<'ready' | 'unavailable' | 'failed'> {
  const registry = system.modules?.registryHost ?? '(none)';
  print(`Module installation: greeter ${GREETER.version} from the OCI registry ${registry}`);
  if (!system.modules?.agentInstalls) {
    print(
      '  not available: this skr-agent has no --oci-registry-host. The module is published\n' +
        `  (npx skr-modules inspect ${registry}); nothing was enabled or timed.`,
    );
    return 'unavailable';
  }
  const skrConfig = system.skr(skr).kubeConfig();
  const timeline = await timeModuleInstall({
    kcp: system.kcp,
    skrConfig,
    namespace: system.namespace,
    skr,
    observations,
    timeoutMs,
  });
  print('Timeline:');
  for (const line of formatModuleTimeline(timeline)) print(line);
  if (timeline.kymaReadyAtMs === undefined || timeline.readyAtMs === undefined) {
    process.stderr.write(
      `demo failed: module ${GREETER.module} was not Ready within ${timeoutMs / 1000} s of enabling it` +
        ` (Manifest state: ${timeline.lastState ?? 'no Manifest'}).\nLogs: ${system.agent.logFile} (kept)\n`,
    );
    return 'failed';
  }
  print(`Module enabled → Manifest Ready: ${timeline.readyAtMs - timeline.sentAtMs} ms`);
  print(`In ${skr} now: ${(await moduleObjectsIn(skrConfig)).join(', ')}`);
  return 'ready';
}

/** Edits the greeter module's ConfigMap in `skr` as a user would and prints how the agent put it back. */
async function revertDrift(
  system: LocalSystem,
  observations: EdgeObservations,
  skr: string,
  timeoutMs: number,
): Promise<boolean> {
  const skrConfig = system.skr(skr).kubeConfig();
  print();
  print(
    `Drift: a user edits ConfigMap ${GREETER.namespace}/${GREETER.configMap} (installed by greeter) in ${skr}`,
  );
  const watch = await watchConfigMap(skrConfig, GREETER.namespace, GREETER.configMap, DRIFT_KEY);
  try {
    const timeline = await timeDriftRevert({
      skrConfig,
      skr,
      watch,
      observations,
      edit: `edited by a user at ${new Date().toISOString()}`,
      timeoutMs,
    });
    print('Timeline:');
    for (const line of formatDriftTimeline(timeline)) print(line);
    if (timeline.revertedAtMs === undefined) return false;
    print(
      `Drift reverted (edit sent → object as installed again): ${timeline.revertedAtMs - timeline.sentAtMs} ms`,
    );
    return true;
  } finally {
    watch.stop();
  }
}

async function demo(options: DemoOptions): Promise<number> {
  const started = Date.now();
  const elapsed = () => `[${((Date.now() - started) / 1000).toFixed(1).padStart(5)} s]`;
  const observations = new EdgeObservations();
  let system: LocalSystem | undefined;
  let live: LiveEvents | undefined;
  let streaming = false;
  let interrupted: (() => void) | undefined;
  const interruption = new Promise<void>((resolve) => (interrupted = resolve));
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals += 1;
    if (signals > 1 || !system) {
      // Nothing to tidy gracefully yet (or asked twice): children die with us, planes by testenv's hook.
      print(`\n${signal}: exiting now`);
      process.exit(130);
    }
    print(`\n${signal}: stopping the agent, the webhooks and the control planes...`);
    interrupted?.();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  const stopAll = async () => {
    await live?.close();
    await system?.stop();
  };
  try {
    if (options.manager === 'go') {
      print(`${elapsed()} building examples/go-manager (the sample module's manager in Go)`);
      await buildGoManager();
    }
    const consolePort = await freePort();
    system = await startLocalSystem({
      dir: options.dir,
      agentArgs: ['--console-address', `127.0.0.1:${consolePort}`],
      startupTimeoutMs: options.timeout,
      progress: (line) => print(`${elapsed()} ${line}`),
      onAdmission: (seen) => observations.admission(seen),
      sampleManager: options.manager === 'go' ? 'go' : true,
      modules: true,
    });
    live = connectLiveEvents(
      system.eventsUrl,
      (event) => {
        observations.event(event);
        if (streaming) print(`event  ${formatLiveEvent(event)}`);
      },
      (reason) => print(`event stream: skipped an invalid message: ${reason}`),
    );
    await live.opened;
    print(`${elapsed()} ready: the agent and ${system.skrs.length} webhooks are running`);
    const token = await consoleViewerToken(system.kcp, system.namespace);
    const fleetConsole = { url: `http://127.0.0.1:${consolePort}/?token=${encodeURIComponent(token)}` };
    print(
      `Console: http://127.0.0.1:${consolePort}/ (read-only; ServiceAccount ${system.namespace}/${CONSOLE_VIEWER})`,
    );
    print(`  open: ${fleetConsole.url}`);
    print(`  or paste the token into its sign-in form: ${token}`);
    let visible = 0;
    // A fresh RoleBinding can lag behind its creation; the console answers the token as soon as RBAC does.
    await waitFor(
      'the console to show the fleet to the viewer token',
      async () => {
        const answer = await fetch(`http://127.0.0.1:${consolePort}/api/fleet`, {
          headers: { authorization: `Bearer ${token}` },
        });
        if (answer.status !== 200) return false;
        visible = ((await answer.json()) as { kymas: { total: number } }).kymas.total;
        return true;
      },
      Date.now() + 30_000,
    );
    print(`  it shows ${visible} Kymas to that token`);

    const skr = system.skrs[0]?.name ?? 'skr1';
    // Two edits: the first may still pay for TLS handshakes (API server → webhook → listener), the second not.
    const EDITS = 2;
    for (let index = 0; index < EDITS; index++) {
      const greeting = `hello from the demo at ${new Date().toISOString()}`;
      print();
      print(
        `Scripted edit ${index + 1} of ${EDITS}: Sample ${SAMPLE_MODULE.namespace}/${SAMPLE_MODULE.name} in ${skr}, spec.greeting = "${greeting}"`,
      );
      const { timeline, later, roundTripMs } = await timeRoundTrip(
        system,
        skr,
        greeting,
        options.editTimeout,
        () => timeEdit(system as LocalSystem, observations, skr, greeting, options.editTimeout),
      );
      print('Timeline:');
      for (const line of formatTimeline(timeline, later)) print(line);
      if (timeline.moduleConfigAtMs === undefined || timeline.callbackAtMs === undefined) {
        const missing =
          timeline.callbackAtMs === undefined
            ? 'no callback reached the listener'
            : 'the ModuleConfig did not follow';
        process.stderr.write(
          `demo failed: ${missing} within ${options.editTimeout / 1000} s of the edit.\n` +
            `Logs: ${system.agent.logFile}, ${system.skrs.map((s) => s.webhook.logFile).join(', ')} (kept)\n`,
        );
        await live.close();
        await system.stop({ keepDir: true });
        return 1;
      }
      print(
        `End to end (edit sent → ModuleConfig updated in KCP): ${timeline.moduleConfigAtMs - timeline.sentAtMs} ms`,
      );
      if (roundTripMs === undefined) {
        process.stderr.write(
          `demo failed: the rendered ConfigMap did not reach ${skr} within ${options.editTimeout / 1000} s of the edit.\n` +
            `Logs: ${system.manager?.child.logFile}, ${system.agent.logFile} (kept)\n`,
        );
        await live.close();
        await system.stop({ keepDir: true });
        return 1;
      }
      print(`Round trip (edit sent → object updated in the SKR): ${roundTripMs} ms`);
    }
    print();

    let moduleOutcome = await installModule(system, observations, skr, options.moduleTimeout);
    if (moduleOutcome === 'ready' && !(await revertDrift(system, observations, skr, options.editTimeout))) {
      process.stderr.write(
        `demo failed: the edit of the greeter ConfigMap was not put back within ${options.editTimeout / 1000} s.\nLogs: ${system.agent.logFile} (kept)\n`,
      );
      moduleOutcome = 'failed';
    }
    if (moduleOutcome === 'failed') {
      await live.close();
      await system.stop({ keepDir: true });
      return 1;
    }
    print();

    if (options.once) {
      print(`${elapsed()} --once: cleaning up`);
      await stopAll();
      print(`${elapsed()} done`);
      return 0;
    }
    for (const line of tryThis(system, fleetConsole)) print(line);
    print();
    print('Live events (time, runtime-id, kind, namespace/name); Ctrl-C stops everything and cleans up:');
    streaming = true;
    const agentExit = system.agent.exited.then(
      (code) => `the agent exited (${code}); see ${system?.agent.logFile}`,
    );
    const streamEnd = live.closed.then(() => 'the event stream closed');
    const reason = await Promise.race([interruption.then(() => undefined), agentExit, streamEnd]);
    await stopAll();
    if (reason) {
      process.stderr.write(`demo stopped: ${reason}\n`);
      return 1;
    }
    print(`${elapsed()} stopped and cleaned up`);
    return 0;
  } catch (error) {
    if (signals > 0) {
      // Ctrl-C during startup or the scripted edits: the planes are gone already, errors are expected.
      await live?.close().catch(() => {});
      await system?.stop().catch(() => {});
      print(`${elapsed()} interrupted; stopped and cleaned up`);
      return 130;
    }
    process.stderr.write(`demo failed: ${describe(error)}\n`);
    await live?.close().catch(() => {});
    if (system) await system.stop({ keepDir: true }).catch(() => {});
    if (!(error instanceof ScratchDirError)) process.stderr.write(`Logs kept in ${options.dir}\n`);
    return 1;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

function describe(error: unknown): string {
  const parts: string[] = [];
  for (let current: unknown = error; current !== undefined && parts.length < 6;) {
    parts.push(current instanceof Error ? current.message : String(current));
    current = current instanceof Error ? current.cause : undefined;
  }
  return parts.join('\n  caused by: ');
}

const command = new Command('npm run demo --')
  .description(
    'Runs skr-watcher on this machine: a KCP and two SKR control planes (real kube-apiservers), skr-agent, and one ' +
      'skr-webhook per SKR registered by the agent; times a scripted Module CR edit in skr1 from the SKR to KCP; ' +
      'then streams live events until Ctrl-C.',
  )
  .option(
    '--once',
    'exit after the scripted edits (0 when their ModuleConfig followed through a callback)',
    false,
  )
  .addOption(
    new Option(
      '--manager <language>',
      "the sample module's manager: examples/sample-manager or examples/go-manager",
    )
      .choices(['ts', 'go'])
      .default('ts'),
  )
  .option('--dir <path>', 'scratch directory for planes, certificates and logs (emptied first)', '.skr-demo')
  .option('--pods', 'run the agent and the webhooks in Pods on real nodes (root; slow first start)', false)
  .addOption(
    new Option(
      '--timeout <duration>',
      'bound of the startup once kube-apiserver and etcd are at hand (a first build is not counted)',
    )
      .argParser(duration)
      .default(240_000, '240s'),
  )
  .addOption(
    new Option('--edit-timeout <duration>', 'how long a scripted edit may take to reach KCP')
      .argParser(duration)
      .default(30_000, '30s'),
  )
  .addOption(
    new Option(
      '--module-timeout <duration>',
      'how long the enabled module may take to become Ready (with --pods at least 240s: image pull and Pod start)',
    )
      .argParser(duration)
      .default(90_000, '90s'),
  )
  .showHelpAfterError()
  .action(async (flags: DemoOptions & { pods: boolean }) => {
    process.exitCode = flags.pods
      ? await podsDemo({
          dir: resolve(flags.dir, 'pods'),
          once: flags.once,
          editTimeoutMs: flags.editTimeout,
          moduleTimeoutMs: Math.max(flags.moduleTimeout, 240_000),
        })
      : await demo({ ...flags, dir: resolve(flags.dir) });
  });

command
  .parseAsync(process.argv)
  .catch((error: unknown) => {
    process.stderr.write(`demo: ${describe(error)}\n`);
    process.exitCode = 1;
  })
  // Everything was stopped; do not wait for idle keep-alive sockets of the Kubernetes clients.
  .finally(() => process.exit(process.exitCode ?? 0));
