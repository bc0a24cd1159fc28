// The image the repository's Dockerfile builds, as a platform team runs it: pulled by a kubelet from the run's
// registry and started by containerd, each shipped command as the image's default entrypoint (skr-agent) or by name
// (a container's `command`), with nothing but what the image holds. A command the image lacks, or one whose modules
// do not all resolve in it, fails here as it would in a cluster.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { CoreV1Api, type V1Container, type V1Pod } from '@kubernetes/client-node';
import { VERSION } from '@skr-watcher/api';
import { nodeSupportProblem, startEnvironment, type Environment } from '@skr-watcher/testenv';

const NAMESPACE = 'image-commands';
/** Pulling the image and starting Node on two busy cores. */
const RUN_MS = 240_000;
/** Container states that never turn into a run: the command is missing, the image unpullable, and so on. */
const NEVER_RUNS = new Set([
  'CreateContainerError',
  'CreateContainerConfigError',
  'RunContainerError',
  'ErrImagePull',
  'ImagePullBackOff',
  'InvalidImageName',
]);

interface Outcome {
  exitCode: number;
  reason: string;
  output: string;
}

describe('the image from the Dockerfile runs every shipped command in a container on a real node', function () {
  // A cold machine builds kubelet and friends first, then the image.
  this.timeout(3_600_000);
  const problem = nodeSupportProblem();
  let parent: string;
  let env: Environment;
  let core: CoreV1Api;
  let image: string;

  before(async function () {
    if (problem) {
      // Only machines that cannot run nodes at all skip; everything else that fails is a failure.
      process.stderr.write(`skipping the image tests: ${problem}\n`);
      this.skip();
    }
    parent = await mkdtemp(join(tmpdir(), 'skr-image-'));
    env = await startEnvironment({
      planes: ['kcp'],
      dir: join(parent, 'planes'),
      nodes: true,
      log: (line) => process.stderr.write(`  ${line}\n`),
    });
    if (!env.nodes) throw new Error('the environment started without nodes');
    image = env.nodes.images.app;
    process.stderr.write(
      `  image ${image}; build figures (s): ${JSON.stringify(env.nodes.images.timings)}\n`,
    );
    core = env.plane('kcp').kubeConfig().makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
  });
  after(async () => {
    await env?.stop();
    if (parent) await rm(parent, { recursive: true, force: true });
  });

  /** Runs one container of the image to its end; answers its exit code and its output, or fails saying why not. */
  async function runToEnd(name: string, container: Omit<V1Container, 'name' | 'image'>): Promise<Outcome> {
    const pod: V1Pod = {
      metadata: { name, namespace: NAMESPACE },
      spec: {
        restartPolicy: 'Never',
        automountServiceAccountToken: false,
        // As the shipped Deployments run it: not as root, nothing written to the image.
        securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
        containers: [
          {
            name: 'command',
            image,
            ...container,
            securityContext: {
              allowPrivilegeEscalation: false,
              readOnlyRootFilesystem: true,
              capabilities: { drop: ['ALL'] },
            },
          },
        ],
      },
    };
    // The namespace's default ServiceAccount comes from the controller-manager a moment after the namespace.
    const deadline = Date.now() + RUN_MS;
    for (;;) {
      try {
        await core.createNamespacedPod({ namespace: NAMESPACE, body: pod });
        break;
      } catch (error) {
        if (Date.now() > deadline) throw new Error(`creating Pod ${name}`, { cause: error });
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
    for (;;) {
      const current = await core.readNamespacedPod({ name, namespace: NAMESPACE });
      const status = current.status?.containerStatuses?.[0];
      const waiting = status?.state?.waiting;
      if (waiting?.reason && NEVER_RUNS.has(waiting.reason))
        throw new Error(`Pod ${name} cannot run: ${waiting.reason}: ${waiting.message ?? ''}`);
      const terminated = status?.state?.terminated;
      if (terminated) {
        const output = await containerOutput(name, current.metadata?.uid ?? '');
        return {
          exitCode: terminated.exitCode,
          reason: `${terminated.reason ?? ''} ${terminated.message ?? ''}`.trim(),
          output,
        };
      }
      if (Date.now() > deadline)
        throw new Error(
          `Pod ${name} did not finish within ${RUN_MS / 1000} s: ${JSON.stringify(current.status)}`,
        );
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }

  /**
   * What the container printed, from the kubelet's log file on the node (CRI format: time, stream, tag, text), as
   * `kubectl logs` would show it.
   */
  async function containerOutput(name: string, uid: string): Promise<string> {
    const file = join(
      env.plane('kcp').dir,
      'node',
      'pod-logs',
      `${NAMESPACE}_${name}_${uid}`,
      'command',
      '0.log',
    );
    const text = await readFile(file, 'utf8').catch(
      (error: unknown) => `(no log at ${file}: ${String(error)})`,
    );
    return text
      .split('\n')
      .filter(Boolean)
      .map((line) => line.split(' ').slice(3).join(' '))
      .join('\n');
  }

  const versionLine = (command: string) => new RegExp(`^${command} ${VERSION.replaceAll('.', '\\.')}\\b`);

  it('runs skr-agent as the default entrypoint: arguments alone go to the agent', async () => {
    const { exitCode, reason, output } = await runToEnd('agent-default', { args: ['--version'] });
    expect(exitCode, `${reason}\n${output}`).to.equal(0);
    expect(output.trim()).to.match(versionLine('skr-agent'));
  });

  it('passes `run` and its flags to the agent, as the shipped Deployment does', async () => {
    const { exitCode, reason, output } = await runToEnd('agent-run-help', { args: ['run', '--help'] });
    expect(exitCode, `${reason}\n${output}`).to.equal(0);
    expect(output).to.include('--skr-webhook-image');
  });

  for (const command of ['skr-webhook', 'skr-certs', 'skr-modules']) {
    it(`runs ${command} by name (command: [${command}])`, async () => {
      const { exitCode, reason, output } = await runToEnd(command, { command: [command, '--version'] });
      expect(exitCode, `${reason}\n${output}`).to.equal(0);
      expect(output.trim()).to.match(command === 'skr-modules' ? /^\d+\.\d+\.\d+$/ : versionLine(command));
    });
  }

  it('skr-modules loads the OCI client it publishes with (its help names its commands)', async () => {
    const { exitCode, reason, output } = await runToEnd('skr-modules-help', {
      command: ['skr-modules', '--help'],
    });
    expect(exitCode, `${reason}\n${output}`).to.equal(0);
    expect(output).to.include('publish');
  });
});
