// A user's edit stream for the shard bench (replica loss as users see it): Module CR edits in SKRs, one
// every `everyMs` round-robin over the targets, each followed by the callback its webhook sends (the v2 body with
// the fingerprint, signed with that SKR's client certificate, to a listener; sent again after Retry-After while the
// answer is not 2xx, as the webhook does), and the time until the edit shows in the Kyma's ModuleConfig.
import type { Agent as HttpsAgent } from 'node:https';
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS, watchEventFor, type ModuleConfig } from '@skr-watcher/api';
import { ResilientInformer, customResourceSource, mergePatchCustomObject } from '@skr-watcher/kube';
import { issueTestLeaf, type TestCa } from '../../agent/test/support/listener-certs.js';
import { sendCallback, tlsAgent } from '../../agent/test/support/listener-client.js';

const SAMPLE_GVK = { group: GROUP, version: KINDS.sample.version, kind: KINDS.sample.kind };
/** The webhook's default max age of an undelivered event: after it the edit counts as lost here. */
const GIVE_UP_MS = 120_000;

export interface EditTarget {
  /** The KCP Kyma's name (its ModuleConfig carries it as the kyma-name label). */
  kyma: string;
  runtimeId: string;
  skr: KubeConfig;
  /** The SKR namespace of its sample Module CR (named `sample`). */
  skrNamespace: string;
}

export interface EditOutcome {
  kyma: string;
  /** When the SKR API server answered the edit (the user's write returned), epoch ms. */
  editedAtMs: number;
  /** Callback sends until one was answered 2xx (or the bench gave up). */
  sends: number;
  /** Status codes of the non-2xx answers ('error' for a failed connection). */
  refused: string[];
  /** When a listener answered 2xx, epoch ms. */
  acceptedAtMs?: number;
  /** When the ModuleConfig first showed this edit (or a later one of the same Module CR), epoch ms. */
  reachedAtMs?: number;
  /** The edit itself failed (the SKR API server refused it). */
  error?: string;
}

export interface EditStream {
  /** No new edits; resolves once every edit reached its ModuleConfig or `waitMs` passed. */
  stop(waitMs: number): Promise<EditOutcome[]>;
}

export interface EditStreamOptions {
  kcp: KubeConfig;
  namespace: string;
  targets: EditTarget[];
  /** Signs the SKRs' client certificates (CN = runtime-id), as the agent's PKI does. */
  ca: TestCa;
  /** Listener ports to send to, round-robin (the survivors'). */
  listenerPorts: number[];
  everyMs: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The sequence number of an edit written by this stream (`greeting: edit-<n>`), -1 for any other greeting. */
const sequenceOf = (config: ModuleConfig | undefined): number => {
  const greeting = (config?.spec.resource as { spec?: { greeting?: unknown } } | undefined)?.spec?.greeting;
  const match = typeof greeting === 'string' ? /^edit-(\d+)$/.exec(greeting) : null;
  return match ? Number(match[1]) : -1;
};

/** Resolves once the ModuleConfigs are watched; the edits start then. */
export async function startEditStream(options: EditStreamOptions): Promise<EditStream> {
  const clients = new Map<string, { api: CustomObjectsApi; agent: HttpsAgent }>();
  for (const target of options.targets) {
    const leaf = issueTestLeaf(options.ca, {
      commonName: target.runtimeId,
      dnsNames: [`${target.runtimeId}.skr.example.com`],
    });
    clients.set(target.kyma, {
      api: target.skr.makeApiClient(CustomObjectsApi),
      agent: tlsAgent({ caPem: options.ca.certPem, certPem: leaf.certPem, keyPem: leaf.keyPem }),
    });
  }
  const outcomes: (EditOutcome & { sequence: number })[] = [];
  const pending = new Set<Promise<void>>();
  let sequence = 0;
  let nextPort = 0;
  const port = () => options.listenerPorts[nextPort++ % options.listenerPorts.length] as number;

  const deliver = async (outcome: EditOutcome, body: string, agent: HttpsAgent) => {
    while (Date.now() - outcome.editedAtMs < GIVE_UP_MS) {
      outcome.sends += 1;
      const answer = await sendCallback(port(), agent, { body }).catch(() => undefined);
      if (answer && answer.status >= 200 && answer.status < 300) {
        outcome.acceptedAtMs = Date.now();
        return;
      }
      outcome.refused.push(answer ? String(answer.status) : 'error');
      const retryAfter = Number(answer?.headers['retry-after']);
      await sleep(Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : 1_000);
    }
  };

  const edit = async (target: EditTarget) => {
    const n = sequence++;
    const { api, agent } = clients.get(target.kyma) as { api: CustomObjectsApi; agent: HttpsAgent };
    const outcome: EditOutcome & { sequence: number } = {
      kyma: target.kyma,
      editedAtMs: Date.now(),
      sends: 0,
      refused: [],
      sequence: n,
    };
    outcomes.push(outcome);
    try {
      const ref = {
        group: GROUP,
        version: KINDS.sample.version,
        plural: KINDS.sample.plural,
        namespace: target.skrNamespace,
        name: 'sample',
      };
      const before = (await api.getNamespacedCustomObject(ref)) as { metadata: { resourceVersion: string } };
      const edited = (await mergePatchCustomObject(api, ref, { spec: { greeting: `edit-${n}` } })) as {
        metadata: { uid: string; generation: number };
      };
      outcome.editedAtMs = Date.now();
      const body = watchEventFor({ namespace: target.skrNamespace, name: 'sample' }, SAMPLE_GVK, {
        uid: edited.metadata.uid,
        generation: edited.metadata.generation,
        previousResourceVersion: before.metadata.resourceVersion,
      });
      await deliver(outcome, JSON.stringify(body), agent);
    } catch (error) {
      outcome.error = error instanceof Error ? error.message : String(error);
    }
  };

  // The ModuleConfigs, watched: an edit has reached KCP once its Kyma's shows it or a later edit. A watch, not a list
  // of all of them every 100 ms: at 5,000 Kymas that list would be a load of its own on the KCP API server during the
  // very takeover it measures; a watch costs the API server one event per write and times each to the millisecond.
  const shown = new Map<string, number>();
  const seen = (config: ModuleConfig) => {
    const kyma = config.metadata.labels?.[LABELS.kymaName];
    if (!kyma) return;
    const sequence = sequenceOf(config);
    if (sequence <= (shown.get(kyma) ?? -1)) return;
    shown.set(kyma, sequence);
    const now = Date.now();
    for (const outcome of outcomes) {
      if (outcome.kyma === kyma && outcome.reachedAtMs === undefined && sequence >= outcome.sequence) {
        outcome.reachedAtMs = now;
      }
    }
  };
  const moduleConfigs = new ResilientInformer<ModuleConfig>({
    kubeConfig: options.kcp,
    source: customResourceSource<ModuleConfig>(options.kcp, {
      group: GROUP,
      version: KINDS.moduleConfig.version,
      plural: KINDS.moduleConfig.plural,
      namespace: options.namespace,
    }),
  });
  moduleConfigs.addHandler({ onAdd: seen, onUpdate: (_before, config) => seen(config) });
  moduleConfigs.start();
  await moduleConfigs.waitForSync();

  let turn = 0;
  const ticker = setInterval(() => {
    const target = options.targets[turn++ % options.targets.length];
    if (!target) return;
    const running = edit(target).finally(() => pending.delete(running));
    pending.add(running);
  }, options.everyMs);

  return {
    async stop(waitMs) {
      clearInterval(ticker);
      const giveUpAt = Date.now() + waitMs;
      await Promise.race([Promise.all(pending), sleep(waitMs)]);
      while (Date.now() < giveUpAt && outcomes.some((o) => o.reachedAtMs === undefined && !o.error))
        await sleep(100);
      await moduleConfigs.stop();
      for (const { agent } of clients.values()) agent.destroy();
      return outcomes.map(({ sequence: _sequence, ...outcome }) => outcome);
    },
  };
}
