// The webhook's configuration put back, on real planes with the real binaries (test/support/system: a KCP, one
// SKR, skr-agent, skr-webhook watching its own configuration with a token of the ServiceAccount the agent installs):
// an SKR user who deletes the webhook's ValidatingWebhookConfiguration or points it elsewhere silences the webhook.
// The API server calls no webhook about webhook configurations, and requeues are an hour apart here, so only the
// webhook's watch can bring the configuration back within 30 s; the Kyma's SKRWebhook condition must say what was
// put back.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import {
  AdmissionregistrationV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type V1ValidatingWebhookConfiguration,
} from '@kubernetes/client-node';
import { GROUP, KINDS, type Kyma } from '@skr-watcher/api';
import {
  SKR_WEBHOOK_CONFIGURATION,
  startLocalSystem,
  waitFor,
  type LocalSystem,
} from '../support/system/index.js';

/** The bar: repaired and reported this long after the change. */
const REPAIRED_WITHIN_MS = 30_000;

describe('webhook configuration deleted or re-pointed in the SKR: put back within 30 s (real planes)', function () {
  this.timeout(600_000);
  let parent: string;
  let system: LocalSystem;
  const figures: string[] = [];

  before(async () => {
    parent = await mkdtemp(join(tmpdir(), 'skr-webhook-config-'));
    system = await startLocalSystem({
      dir: join(parent, 'system'),
      skrs: ['skr1'],
      watchWebhookConfiguration: true,
    });
  });
  after(async () => {
    await system?.stop();
    if (parent) await rm(parent, { recursive: true, force: true });
    if (figures.length > 0)
      console.log(`      put back and reported after:\n        ${figures.join('\n        ')}`);
  });

  const admission = () => system.skrs[0]!.kubeConfig().makeApiClient(AdmissionregistrationV1Api);
  const readConfiguration = () =>
    admission().readValidatingWebhookConfiguration({ name: SKR_WEBHOOK_CONFIGURATION });

  async function skrWebhookCondition() {
    const kyma = (await system.kcp.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
      group: GROUP,
      version: KINDS.kyma.version,
      namespace: system.namespace,
      plural: KINDS.kyma.plural,
      name: system.skrs[0]!.name,
    })) as Kyma;
    return kyma.status?.conditions?.find((condition) => condition.type === 'SKRWebhook');
  }

  /** The webhook's hooks as the agent wants them: every clientConfig, by hook name. */
  const clientConfigs = (configuration: V1ValidatingWebhookConfiguration) =>
    Object.fromEntries((configuration.webhooks ?? []).map((hook) => [hook.name, hook.clientConfig]));

  let installed: Record<string, unknown>;
  before(async () => {
    // The agent's first passes are done once the condition says Installed (the webhook's start-up resync included).
    await waitFor(
      'the SKRWebhook condition to say Installed',
      async () => (await skrWebhookCondition())?.reason === 'Installed',
      Date.now() + 120_000,
    );
    installed = clientConfigs(await readConfiguration());
    expect(Object.keys(installed), 'hooks installed').to.have.length.greaterThan(0);
  });

  /** Full reconciles the agent ran so far (its /metrics). */
  async function reconciles(): Promise<number> {
    const text = await (await fetch(`http://127.0.0.1:${system.agentMetricsPort}/metrics`)).text();
    return [...text.matchAll(/^skr_agent_reconcile_total\{[^}]*\} (\d+)$/gm)].reduce(
      (sum, match) => sum + Number(match[1]),
      0,
    );
  }

  /** Waits until no reconcile ran for 5 s, so that no pass already due can repair the change instead of the watch. */
  async function agentQuiet(): Promise<void> {
    let last = -1;
    await waitFor(
      'the agent to run no reconcile for 5 s',
      async () => {
        const now = await reconciles();
        const quiet = now === last;
        last = now;
        if (!quiet) await new Promise((resolve) => setTimeout(resolve, 5_000));
        return quiet;
      },
      Date.now() + 120_000,
    );
  }

  /** Makes the change, then waits until the configuration is as installed and the condition names the repair. */
  async function putBack(what: string, change: () => Promise<void>, expected: RegExp): Promise<void> {
    await agentQuiet();
    const before = (await skrWebhookCondition())?.message;
    const started = Date.now();
    await change();
    let seen = '';
    await waitFor(
      `${what}: the configuration put back and the SKRWebhook condition saying so within ${REPAIRED_WITHIN_MS / 1000} s`,
      async () => {
        const condition = await skrWebhookCondition();
        seen = `condition ${condition?.status} ${condition?.reason}: ${condition?.message}`;
        if (condition?.status !== 'True' || condition.reason !== 'Restored') return false;
        if (condition.message === before || !expected.test(condition.message ?? '')) return false;
        const configuration = await readConfiguration().catch(() => undefined);
        seen += configuration ? '; configuration present' : '; configuration absent';
        return (
          configuration !== undefined &&
          JSON.stringify(clientConfigs(configuration)) === JSON.stringify(installed)
        );
      },
      started + REPAIRED_WITHIN_MS,
    ).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}; last seen: ${seen}`, { cause: error });
    });
    figures.push(`${what}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }

  it('deleted: back within 30 s, the condition says Restored (deleted)', async () => {
    await putBack(
      'deleted',
      async () => {
        await admission().deleteValidatingWebhookConfiguration({ name: SKR_WEBHOOK_CONFIGURATION });
      },
      /ValidatingWebhookConfiguration skr-webhook \(deleted\)/,
    );
  });

  it('re-pointed to another URL: back within 30 s, the condition says Restored (changed)', async () => {
    await repoint('clientConfig.url re-pointed', { url: 'https://127.0.0.1:1/validate/elsewhere' });
  });

  it('caBundle replaced: back within 30 s, the condition says Restored (changed)', async () => {
    await repoint('clientConfig.caBundle replaced', { caBundle: Buffer.from('not a CA').toString('base64') });
  });

  /** Every hook's clientConfig changed by `change`, in a merge patch as an SKR user's client sends it. */
  async function repoint(what: string, change: Record<string, string>): Promise<void> {
    const configuration = await readConfiguration();
    const webhooks = (configuration.webhooks ?? []).map((hook) => ({
      ...hook,
      clientConfig: { ...hook.clientConfig, ...change },
    }));
    await putBack(
      what,
      async () => {
        await admission().patchValidatingWebhookConfiguration(
          { name: SKR_WEBHOOK_CONFIGURATION, body: { webhooks }, fieldManager: 'skr-user' },
          // client-node sends a JSON patch unless told otherwise.
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        );
      },
      /ValidatingWebhookConfiguration skr-webhook \(changed\)/,
    );
  }
});
