// The agent as the image runs it: agent/dist/bundle/main.cjs, one file that esbuild builds from agent/dist during
// `npm run build` (decision 017). Run from a copy outside the repository, next to nothing but the CRD manifests, it
// must still answer --help and reconcile a Kyma to Ready on real planes, installing the CRDs in the SKR from
// manifests/crds (found relative to the file, as in the image).
import { spawn } from 'node:child_process';
import { cp, mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { ApiextensionsV1Api } from '@kubernetes/client-node';
import { GROUP, KINDS } from '@skr-watcher/api';
import { startEnvironment, type Environment } from '@skr-watcher/testenv';
import { seedKcp } from '../../test/support/kcp-seed.js';
import { CRD_DIGEST_ANNOTATION } from '../src/reconcile/kyma/crds.js';

const BUNDLE = fileURLToPath(new URL('../dist/bundle/', import.meta.url));
const CRDS = fileURLToPath(new URL('../../manifests/crds/', import.meta.url));

async function run(
  main: string,
  args: string[],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  // The copy has no node_modules above it: a module the bundle failed to include cannot be resolved.
  const child = spawn(process.execPath, [main, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    cwd: tmpdir(),
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { code, stdout, stderr };
}

describe('skr-agent bundle (one file, as in the image)', function () {
  this.timeout(180_000);
  let env: Environment;
  let root: string;
  let main: string;
  const namespace = 'agent-bundle';

  before(async function () {
    await stat(join(BUNDLE, 'main.cjs')).catch(() => {
      throw new Error(`${BUNDLE}main.cjs is missing: \`npm run build\` builds it`);
    });
    // The image's layout: <root>/agent/dist/bundle/main.cjs and <root>/manifests/crds.
    root = await mkdtemp(join(tmpdir(), 'skr-agent-bundle-'));
    await mkdir(join(root, 'agent', 'dist'), { recursive: true });
    await cp(BUNDLE, join(root, 'agent', 'dist', 'bundle'), { recursive: true });
    await cp(CRDS, join(root, 'manifests', 'crds'), { recursive: true });
    main = join(root, 'agent', 'dist', 'bundle', 'main.cjs');
    env = await startEnvironment({ planes: ['kcp', 'skr1'] });
    await seedKcp(env, namespace, ['skr1']);
  });

  after(async () => {
    await env?.stop();
    if (root) await rm(root, { recursive: true, force: true });
  });

  it('answers --help for each command', async () => {
    for (const args of [['--help'], ['run', '--help'], ['reconcile', '--help']]) {
      const help = await run(main, args);
      expect(help.code, `${args.join(' ')}: ${help.stderr}`).to.equal(0);
      expect(help.stdout).to.include('Usage: skr-agent');
    }
  });

  it('reconciles a Kyma to Ready and installs the CRDs in its SKR from the manifests next to it', async () => {
    const once = await run(main, [
      'reconcile',
      '--once',
      '--kyma',
      'skr1',
      '--kubeconfig',
      env.plane('kcp').kubeconfigPath,
      '--namespace',
      namespace,
    ]);
    expect(once.code, once.stderr).to.equal(0);
    expect(JSON.parse(once.stdout.trim().split('\n').pop() ?? '{}')).to.include({
      kyma: `${namespace}/skr1`,
      state: 'Ready',
    });
    const crd = await env
      .plane('skr1')
      .kubeConfig()
      .makeApiClient(ApiextensionsV1Api)
      .readCustomResourceDefinition({ name: `${KINDS.kyma.plural}.${GROUP}` });
    expect(crd.metadata?.annotations?.[CRD_DIGEST_ANNOTATION]).to.be.a('string').with.length.above(0);
  });
});
