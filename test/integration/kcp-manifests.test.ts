// manifests/kcp as an operator installs it: a real kubectl (built by testenv from k8s.io/kubectl, its kustomize
// included) against a fresh KCP API server: `kubectl apply -k manifests/kcp` creates every object in one go, and the
// image is set in one place (kustomize images:) that also names the webhook the agent installs in SKRs; and
// manifests/monitoring's ServiceMonitor finds the agent and presents a token that may read its /metrics.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { AppsV1Api, type V1Container } from '@kubernetes/client-node';
import { ensureKubectl, startEnvironment, type Environment } from '@skr-watcher/testenv';
import { parseAllDocuments } from 'yaml';

const MANIFESTS = fileURLToPath(new URL('../../manifests/', import.meta.url));
const KCP = join(MANIFESTS, 'kcp');
const SHIPPED_IMAGE = 'ghcr.io/example/skr-watcher:0.1.0';

interface Ran {
  status: number | null;
  stdout: string;
  stderr: string;
}

const execFileAsync = promisify(execFile);

/** Runs a command to its end; a non-zero exit is an answer, not an error. */
function run(command: string, args: string[]): Promise<Ran> {
  return execFileAsync(command, args, { maxBuffer: 64 * 1024 * 1024 }).then(
    ({ stdout, stderr }) => ({ status: 0, stdout, stderr }),
    (error: { code?: number | string; stdout?: string; stderr?: string }) => {
      if (typeof error.code !== 'number') throw error;
      return { status: error.code, stdout: error.stdout ?? '', stderr: error.stderr ?? '' };
    },
  );
}

interface Rendered {
  kind: string;
  metadata: { name: string; namespace?: string };
  spec?: { template?: { spec?: { containers?: V1Container[] } } };
}

/** What the monitoring test reads of the rendered objects. */
interface Monitored {
  apiVersion: string;
  kind: string;
  type?: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec?: {
    jobLabel?: string;
    selector?: { matchLabels?: Record<string, string> };
    namespaceSelector?: { matchNames?: string[] };
    ports?: { name?: string }[];
    endpoints?: {
      port?: string;
      authorization?: { type?: string; credentials?: { name?: string; key?: string } };
    }[];
  };
}

function agentContainer(objects: Rendered[]): V1Container {
  const deployment = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'skr-agent');
  const container = deployment?.spec?.template?.spec?.containers?.find((c) => c.name === 'agent');
  if (!container) throw new Error('no agent container in the skr-agent Deployment');
  return container;
}

/** The image the agent runs, and the one it installs as the webhook (its flag, through the variable it names). */
function images(container: V1Container): { agent?: string; webhook?: string } {
  const flag = container.args?.find((arg) => arg.startsWith('--skr-webhook-image='))?.split('=')[1];
  const variable = /^\$\((\w+)\)$/.exec(flag ?? '')?.[1];
  const webhook = variable ? container.env?.find((e) => e.name === variable)?.value : flag;
  return { agent: container.image, webhook };
}

describe('manifests/kcp with a real kubectl against a fresh KCP', function () {
  // A cold machine builds kubectl (and kube-apiserver) from the Go module proxy first.
  this.timeout(3_600_000);
  let parent: string;
  let env: Environment;
  let kubectl: string;
  let kubeconfig: string;
  const k = (...args: string[]) => run(kubectl, ['--kubeconfig', kubeconfig, ...args]);

  before(async () => {
    kubectl = await ensureKubectl();
    parent = await mkdtemp(join(tmpdir(), 'skr-kcp-manifests-'));
    env = await startEnvironment({ planes: ['kcp'], dir: join(parent, 'planes') });
    kubeconfig = env.plane('kcp').kubeconfigPath;
  });
  after(async () => {
    await env?.stop();
    if (parent) await rm(parent, { recursive: true, force: true });
  });

  it('kubectl apply -k manifests/kcp on a fresh KCP creates every object in one go', async () => {
    const crds = await k('apply', '--server-side', '-f', join(MANIFESTS, 'crds'));
    expect(crds.status, crds.stderr).to.equal(0);
    const applied = await k('apply', '-k', KCP);
    expect(applied.stderr, 'kubectl apply -k reported errors').to.equal('');
    expect(applied.status).to.equal(0);

    const rendered = await k('kustomize', KCP);
    expect(rendered.status, rendered.stderr).to.equal(0);
    const objects = parseAllDocuments(rendered.stdout).map((d) => d.toJS() as Rendered);
    expect(objects[0]?.kind, 'the Namespace comes first').to.equal('Namespace');
    const present = await k('get', '-k', KCP, '-o', 'name');
    expect(present.stderr, 'objects missing after apply').to.equal('');
    expect(present.stdout.trim().split('\n')).to.have.length(objects.length);
    console.log(`      ${objects.length} objects applied`);
  });

  it('one images: entry sets the image of the agent and of the webhook it installs', async () => {
    // The shipped file names the image once, in kustomization.yaml.
    const naming: string[] = [];
    for (const file of await readdir(KCP))
      if ((await readFile(join(KCP, file), 'utf8')).includes('ghcr.io/example/skr-watcher'))
        naming.push(file);
    expect(naming).to.deep.equal(['kustomization.yaml']);

    const base = await k('kustomize', KCP);
    expect(
      images(agentContainer(parseAllDocuments(base.stdout).map((d) => d.toJS() as Rendered))),
    ).to.deep.equal({ agent: SHIPPED_IMAGE, webhook: SHIPPED_IMAGE });

    // A team's overlay sets its own registry and digest in one place.
    const overlay = join(parent, 'overlay');
    const ours = 'registry.example.org/platform/skr-watcher';
    const digest = `sha256:${'a'.repeat(64)}`;
    await mkdir(overlay, { recursive: true });
    await writeFile(
      join(overlay, 'kustomization.yaml'),
      [
        'apiVersion: kustomize.config.k8s.io/v1beta1',
        'kind: Kustomization',
        'resources:',
        `  - ${relative(overlay, KCP)}`,
        'images:',
        '  - name: ghcr.io/example/skr-watcher',
        `    newName: ${ours}`,
        `    digest: ${digest}`,
        '',
      ].join('\n'),
    );
    const applied = await k('apply', '-k', overlay);
    expect(applied.stderr).to.equal('');
    expect(applied.status).to.equal(0);
    const deployment = await env
      .plane('kcp')
      .kubeConfig()
      .makeApiClient(AppsV1Api)
      .readNamespacedDeployment({ name: 'skr-agent', namespace: 'kcp-system' });
    const container = deployment.spec?.template.spec?.containers.find((c) => c.name === 'agent');
    if (!container) throw new Error('no agent container in the applied Deployment');
    expect(images(container)).to.deep.equal({ agent: `${ours}@${digest}`, webhook: `${ours}@${digest}` });
  });

  it("manifests/monitoring's ServiceMonitor selects the agent's metrics Service and scrapes it with a token that may read /metrics", async () => {
    // The component as an overlay of manifests/kcp uses it (the Prometheus Operator's kinds are not in this KCP:
    // only the rest is applied).
    const overlay = join(parent, 'monitoring-overlay');
    await mkdir(overlay, { recursive: true });
    await writeFile(
      join(overlay, 'kustomization.yaml'),
      [
        'apiVersion: kustomize.config.k8s.io/v1beta1',
        'kind: Kustomization',
        'resources:',
        `  - ${relative(overlay, KCP)}`,
        'components:',
        `  - ${relative(overlay, join(MANIFESTS, 'monitoring'))}`,
        '',
      ].join('\n'),
    );
    const built = await k('kustomize', overlay);
    expect(built.status, built.stderr).to.equal(0);
    const objects = parseAllDocuments(built.stdout).map((d) => d.toJS() as Monitored);
    const monitor = objects.find((o) => o.kind === 'ServiceMonitor');
    if (!monitor?.spec) throw new Error('no ServiceMonitor in manifests/monitoring');
    const selected = objects.filter(
      (o) =>
        o.kind === 'Service' &&
        o.metadata.namespace !== undefined &&
        monitor.spec?.namespaceSelector?.matchNames?.includes(o.metadata.namespace) &&
        Object.entries(monitor.spec?.selector?.matchLabels ?? {}).every(
          ([key, value]) => o.metadata.labels?.[key] === value,
        ),
    );
    expect(selected.map((o) => o.metadata.name)).to.deep.equal(['skr-agent-metrics']);
    const [service] = selected;
    const [endpoint] = monitor.spec.endpoints ?? [];
    expect(service?.spec?.ports?.map((port) => port.name)).to.include(endpoint?.port);
    // The job label the alerts read `up` of.
    expect(service?.metadata.labels?.[monitor.spec.jobLabel ?? '']).to.equal('skr-agent');

    // The token comes from a Secret (authorization), not from Prometheus's own file (bearerTokenFile, deprecated).
    expect(endpoint).to.not.have.property('bearerTokenFile');
    expect(endpoint?.authorization?.type).to.equal('Bearer');
    const secret = objects.find(
      (o) => o.kind === 'Secret' && o.metadata.name === endpoint?.authorization?.credentials?.name,
    );
    expect(secret?.type).to.equal('kubernetes.io/service-account-token');
    const account = secret?.metadata.annotations?.['kubernetes.io/service-account.name'];
    expect(account, 'the token Secret names its ServiceAccount').to.be.a('string');

    // Applied to the KCP, that ServiceAccount may GET /metrics, as the agent's SubjectAccessReview asks.
    const rest = join(overlay, 'without-operator-kinds.yaml');
    await writeFile(
      rest,
      objects
        .filter((o) => !o.apiVersion.startsWith('monitoring.coreos.com/'))
        .map((o) => JSON.stringify(o))
        .join('\n---\n'),
    );
    const applied = await k('apply', '-f', rest);
    expect(applied.stderr).to.equal('');
    const allowed = await k(
      'auth',
      'can-i',
      'get',
      '/metrics',
      `--as=system:serviceaccount:${secret?.metadata.namespace}:${account}`,
    );
    expect(allowed.stdout.trim()).to.equal('yes');
  });
});
