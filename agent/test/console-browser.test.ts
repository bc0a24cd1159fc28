// The console as an on-call engineer uses it: the real agent (`skr-agent run --console-address`) on real planes, a
// real headless browser (Debian's chromium, driven by playwright-core) opening a one-time token link. The overview
// lists both Kymas with their module states; a Kyma's page shows its modules; a callback accepted by the listener and
// a pause written in KCP both reach the open page without a reload. Two screenshots are saved to a printed directory.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import { chromium, type Browser, type Page } from 'playwright-core';
import { GROUP, KINDS, LABELS, PAUSE_ANNOTATIONS } from '@skr-watcher/api';
import { freePort, sharedEnvironment } from '@skr-watcher/testenv';
import { seedKcp } from '../../test/support/kcp-seed.js';
import { waitUntil } from '../../test/support/eventually.js';
import { listenerFlags, QUIET_REQUEUE_FLAGS, runAgent, type AgentChild } from './support/agent-child.js';
import { createTestCa, issueTestLeaf } from './support/listener-certs.js';
import { sendCallback, tlsAgent, v2Body } from './support/listener-client.js';

const SKRS = ['skr1', 'skr2'] as const;
const KYMA_REF = { group: GROUP, version: KINDS.kyma.version, plural: KINDS.kyma.plural };

function installedChromium(): string | undefined {
  for (const name of ['chromium', 'chromium-browser']) {
    try {
      return execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim() || undefined;
    } catch {
      // not this one
    }
  }
  return undefined;
}

describe('console in a real browser against the real agent', function () {
  this.timeout(300_000);
  const executablePath = installedChromium();
  const namespace = `console-browser-${randomBytes(4).toString('hex')}`;
  let kcp: KubeConfig;
  let dir = '';
  let agent: AgentChild | undefined;
  let browser: Browser | undefined;
  let page: Page;
  let consoleUrl = '';
  let listenerPort = 0;
  let token = '';
  let ca: ReturnType<typeof createTestCa>;
  let screenshots = '';

  before(async function () {
    if (!executablePath) {
      process.stdout.write(
        '      skipped: no chromium on PATH (apt-get install -y chromium; .ci/run installs it as root)\n',
      );
      this.skip();
    }
    const env = await sharedEnvironment();
    kcp = env.plane('kcp').kubeConfig();
    await seedKcp(env, namespace, SKRS);
    // The viewer: may get and list Kymas in the namespace, nothing else.
    const core = kcp.makeApiClient(CoreV1Api);
    const rbac = kcp.makeApiClient(RbacAuthorizationV1Api);
    await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'on-call' } } });
    await rbac.createNamespacedRole({
      namespace,
      body: {
        metadata: { name: 'kyma-viewer' },
        rules: [{ apiGroups: [GROUP], resources: [KINDS.kyma.plural], verbs: ['get', 'list'] }],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'kyma-viewer' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'kyma-viewer' },
        subjects: [{ kind: 'ServiceAccount', name: 'on-call', namespace }],
      },
    });
    const issued = await core.createNamespacedServiceAccountToken({
      name: 'on-call',
      namespace,
      body: { spec: { audiences: [], expirationSeconds: 3600 } },
    });
    token = issued.status?.token ?? '';

    dir = await mkdtemp(join(tmpdir(), 'console-browser-'));
    screenshots = await mkdtemp(join(tmpdir(), 'skr-console-screenshots-'));
    ca = createTestCa('console-test-ca');
    listenerPort = await freePort();
    const consolePort = await freePort();
    consoleUrl = `http://127.0.0.1:${consolePort}`;
    const started = runAgent(env.plane('kcp').kubeconfigPath, namespace, [
      ...(await listenerFlags(dir, ca, listenerPort)),
      '--console-address',
      `127.0.0.1:${consolePort}`,
      ...QUIET_REQUEUE_FLAGS,
    ]);
    agent = started;
    const states = async () =>
      Promise.all(
        SKRS.map(async (name) => {
          const kyma = (await kcp
            .makeApiClient(CustomObjectsApi)
            .getNamespacedCustomObject({ ...KYMA_REF, namespace, name })) as {
            status?: { modules?: { state?: string }[] };
          };
          return kyma.status?.modules?.[0]?.state;
        }),
      );
    await waitUntil(
      'both Kymas have a module state',
      async () => (await states()).every(Boolean),
      120_000,
    ).catch((error: unknown) => {
      throw new Error(`agent output:\n${started.output().slice(-4000)}`, { cause: error });
    });
    await waitUntil(
      'the console answers',
      async () => (await fetch(`${consoleUrl}/api/fleet`).catch(() => undefined))?.status === 401,
      30_000,
    );
    browser = await chromium.launch({ executablePath, args: ['--no-sandbox'] });
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  });

  after(async () => {
    await browser?.close();
    if (agent && agent.child.exitCode === null) {
      agent.child.kill('SIGTERM');
      await agent.exited;
    }
    if (dir) await rm(dir, { recursive: true, force: true });
    await kcp
      ?.makeApiClient(CoreV1Api)
      .deleteNamespace({ name: namespace })
      .catch(() => {});
    if (screenshots) process.stdout.write(`      screenshots: ${screenshots}\n`);
  });

  it('opens the overview from a one-time token link: both Kymas and their module states', async () => {
    await page.goto(`${consoleUrl}/?token=${encodeURIComponent(token)}`);
    await page.locator('[data-testid=kymas] tr[data-kyma=skr2]').waitFor();
    // The token left the address bar and lives in this tab's sessionStorage.
    expect(page.url()).to.equal(`${consoleUrl}/`);
    expect(await page.evaluate(() => sessionStorage.getItem('skr-console-token'))).to.equal(token);
    const rows = await page
      .locator('[data-testid=kymas] tbody tr')
      .evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-kyma')));
    expect([...rows].sort()).to.deep.equal(['skr1', 'skr2']);
    const summary = await page.locator('[data-testid=fleet-summary]').innerText();
    expect(summary).to.match(new RegExp(`^2 Kymas in ${namespace}: `));
    const sample = await page.locator('[data-testid=modules] tr[data-module=sample]').innerText();
    expect(sample).to.match(/sample\s+2\s+/);
    expect(sample).to.match(/\b(Ready|Processing|Warning|Error)\b/);
    await page.screenshot({ path: join(screenshots, 'overview.png'), fullPage: true });
  });

  it("opens a Kyma's page and shows a callback and a pause as they happen, without a reload", async () => {
    await page.locator('[data-testid=kymas] tr[data-kyma=skr1] a').click();
    await page.locator('[data-testid=kyma-fields]').waitFor();
    expect(page.url()).to.equal(`${consoleUrl}/kymas/skr1`);
    expect(await page.locator('[data-testid=modules] tr[data-module=sample]').innerText()).to.match(
      /^sample\s/,
    );
    expect(await page.locator('[data-testid=kyma-fields]').innerText()).to.match(/Paused\s+no/);
    await page.evaluate(() => ((globalThis as unknown as { loadedOnce: boolean }).loadedOnce = true));

    // A callback from SKR 1's webhook identity, through the agent's mTLS listener.
    const leaf = issueTestLeaf(ca, { commonName: 'skr1', dnsNames: ['skr1.local'] });
    const answer = await sendCallback(
      listenerPort,
      tlsAgent({ caPem: ca.certPem, certPem: leaf.certPem, keyPem: leaf.keyPem }),
      { body: v2Body('sample', 'kyma-system') },
    );
    expect(answer.status).to.equal(200);
    await page.locator('[data-testid=callbacks] li', { hasText: 'Sample' }).waitFor({ timeout: 30_000 });

    // An edit in KCP: someone pauses the Kyma.
    await kcp.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
      {
        ...KYMA_REF,
        namespace,
        name: 'skr1',
        body: {
          metadata: {
            labels: { [LABELS.skipReconciliation]: 'true' },
            annotations: {
              [PAUSE_ANNOTATIONS.by]: 'jane@example.com',
              [PAUSE_ANNOTATIONS.reason]: 'INC-1234',
            },
          },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await page
      .locator('[data-testid=kyma-fields]', { hasText: 'yes, by jane@example.com: INC-1234' })
      .waitFor({ timeout: 30_000 });
    // The same document all along: no navigation happened.
    expect(
      await page.evaluate(() => (globalThis as unknown as { loadedOnce?: boolean }).loadedOnce),
    ).to.equal(true);
    await page.screenshot({ path: join(screenshots, 'kyma-skr1.png'), fullPage: true });
  });
});
