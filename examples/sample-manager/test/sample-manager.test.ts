// sample-manager: its rendering, and the binary as a user runs it (flags, health, metrics, SIGTERM) against a real
// KCP API server. The round trip through the agent into an SKR is in test/integration/module-manager.test.ts.
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { GROUP, KINDS, type ModuleConfig } from '@skr-watcher/api';
import { freePort, sharedEnvironment } from '@skr-watcher/testenv';
import { eventually } from '../../../test/support/eventually.js';
import { SAMPLE_CONFIG_MAP, renderSample } from '../src/index.js';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
const NODE_ARGS = ['--import', 'tsx', '--conditions=source', MAIN];

const config = (spec: Record<string, unknown>): ModuleConfig => ({
  apiVersion: `${GROUP}/${KINDS.moduleConfig.version}`,
  kind: KINDS.moduleConfig.kind,
  metadata: { name: 'skr1-sample-0000', namespace: 'kcp-system' },
  spec: {
    kyma: 'skr1',
    module: 'sample',
    resource: { apiVersion: `${GROUP}/v1alpha1`, kind: 'Sample', metadata: { name: 'sample' }, spec },
  },
});

describe('sample-manager', function () {
  this.timeout(120_000);

  it("renders the Sample CR's greeting and replicas into one ConfigMap in kyma-system, and nothing else of the spec", () => {
    const [map] = renderSample(config({ greeting: 'hi', replicas: 3, note: 'not rendered' }));
    expect(map).to.deep.include({ apiVersion: 'v1', kind: 'ConfigMap' });
    expect(map?.metadata).to.include(SAMPLE_CONFIG_MAP);
    expect(map?.['data']).to.deep.equal({ module: 'sample', greeting: 'hi', replicas: '3' });
    expect(renderSample(config({ greeting: 'hi', replicas: 3, note: 'changed' }))).to.deep.equal(
      renderSample(config({ greeting: 'hi', replicas: 3, note: 'not rendered' })),
    );
  });

  it('answers --help and --version, and refuses a bad flag with exit code 2', () => {
    const help = spawnSync(process.execPath, [...NODE_ARGS, '--help'], { encoding: 'utf8' });
    expect(help.status, help.stderr).to.equal(0);
    expect(help.stdout).to.contain('--kubeconfig').and.contain('--metrics-address');
    const version = spawnSync(process.execPath, [...NODE_ARGS, '--version'], { encoding: 'utf8' });
    expect(version.status, version.stderr).to.equal(0);
    expect(version.stdout.trim()).to.equal('0.1.0');
    const bad = spawnSync(process.execPath, [...NODE_ARGS, '--workers', 'many'], { encoding: 'utf8' });
    expect(bad.status).to.equal(2);
    expect(bad.stderr).to.contain('--workers');
  });

  it('serves /readyz and module manager metrics once its watches have listed, and stops on SIGTERM with exit 0', async () => {
    const kcp = (await sharedEnvironment()).plane('kcp');
    const port = await freePort();
    const child = spawn(
      process.execPath,
      [...NODE_ARGS, '--kubeconfig', kcp.kubeconfigPath, '--metrics-address', `127.0.0.1:${port}`],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await eventually(
        'sample-manager ready',
        async () => {
          const answer = await fetch(`http://127.0.0.1:${port}/readyz`);
          return answer.status === 200 ? true : undefined;
        },
        60_000,
      );
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(metrics).to.contain('informer_relists_total{resource="moduleconfigs"}');
      expect(metrics).to.contain('informer_relists_total{resource="syncresources"}');
      expect(metrics).to.contain('# TYPE module_manager_syncresource_writes_total counter');
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited, output).to.equal(0);
    expect(output).to.contain('"msg":"stopped"');
  });
});
