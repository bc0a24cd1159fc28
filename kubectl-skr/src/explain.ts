// `kubectl skr explain <kyma>`: everything about one SKR on one screen, read from KCP only: the Kyma's status
// (state, the SKR side as SKRConnected reports it, conditions, modules), its Manifests, the SKRWebhook condition,
// the webhook certificate Secret, the last Events, and what to do next. A part the caller may not read is named
// with the refusal instead of failing the whole answer.
import {
  CONDITION_TYPES,
  KINDS,
  LABELS,
  RUNBOOK_DIR,
  adviceFor,
  foundCertificate,
  kymaEvents,
  kymaView,
  readKyma,
  readManifests,
  viewData,
  type CertificateView,
  type Explanation,
  type KymaEvent,
  type KymaView,
} from '@skr-watcher/api';
import { describeCertificate, webhookTlsSecretName, RENEW_BEFORE_MS, SECRET_KEYS } from '@skr-watcher/pki';
import { PluginError, type Kcp } from './kcp.js';
import { age, columns, renderData, type OutputFormat } from './output.js';

export async function explainKyma(
  kcp: Kcp,
  name: string,
  lastEvents: number,
  now: Date,
): Promise<Explanation> {
  const kyma = readKyma(await kcp.get('kyma', name));
  const notShown: string[] = [];
  const optional = async <T>(what: string, read: () => Promise<T>, fallback: T): Promise<T> => {
    try {
      return await read();
    } catch (error) {
      if (!(error instanceof PluginError)) throw error;
      notShown.push(`${what}: ${error.message}`);
      return fallback;
    }
  };
  const [manifests, certificate, events] = await Promise.all([
    optional('Manifests', () => kcp.list('manifest', `${LABELS.kymaName}=${name}`), [] as unknown[]),
    certificateOf(kcp, name),
    optional('Events', () => eventsOf(kcp, name), [] as KymaEvent[]),
  ]);
  const view = kymaView(kyma, readManifests(manifests));
  view.certificate = certificate;
  return { kyma: view, events: events.slice(-lastEvents), advice: adviceFor(view, now), notShown };
}

/** The SKR's webhook certificate as the agent keeps it in KCP (`<kyma>-webhook-tls`, agent/src/registration). */
async function certificateOf(kcp: Kcp, kymaName: string): Promise<CertificateView> {
  const secret = webhookTlsSecretName(kymaName);
  try {
    const read = await kcp.request({ verb: 'get', resource: 'secrets', name: secret }, () =>
      kcp.core.readNamespacedSecret({ namespace: kcp.namespace, name: secret }),
    );
    const pem = read.data?.[SECRET_KEYS.cert];
    if (!pem) return { kind: 'missing', secret };
    return foundCertificate(secret, describeCertificate(Buffer.from(pem, 'base64').toString('utf8')));
  } catch (error) {
    if (error instanceof PluginError && /not found/.test(error.message)) return { kind: 'missing', secret };
    return { kind: 'unreadable', secret, why: error instanceof Error ? error.message : String(error) };
  }
}

async function eventsOf(kcp: Kcp, kymaName: string): Promise<KymaEvent[]> {
  const list = await kcp.request({ verb: 'list', resource: 'events' }, () =>
    kcp.core.listNamespacedEvent({
      namespace: kcp.namespace,
      fieldSelector: `involvedObject.name=${kymaName},involvedObject.kind=${KINDS.kyma.kind}`,
    }),
  );
  return kymaEvents(list.items);
}

export function renderExplanation(explanation: Explanation, format: OutputFormat, now: Date): string {
  const { kyma, events, advice, notShown } = explanation;
  if (format === 'json' || format === 'yaml') {
    return renderData({ kyma: viewData(kyma), events, advice, notShown }, format);
  }
  const lines: string[] = [];
  const field = (label: string, value: string) => lines.push(`${`${label}:`.padEnd(14)}${value}`);
  field('Kyma', `${kyma.namespace}/${kyma.name}`);
  field(
    'Runtime ID',
    kyma.runtimeId ?? '- (no kyma-project.io/runtime-id label: the listener cannot wake it)',
  );
  const pass = kyma.lastOperation;
  field(
    'State',
    `${kyma.state}${pass ? `   (last status write ${age(pass.lastUpdateTime, now)} ago: ${pass.operation})` : '   (no pass recorded yet)'}`,
  );
  field(
    'Paused',
    kyma.paused
      ? `yes, by ${kyma.paused.by ?? 'someone (no record of who)'}${kyma.paused.since ? ` since ${kyma.paused.since}` : ''}${kyma.paused.reason ? `: ${kyma.paused.reason}` : ''}`
      : 'no',
  );
  if (kyma.channel) field('Channel', kyma.channel);
  if (kyma.owner) field('Owner', `${kyma.owner} (agent replica)`);
  field('SKR', skrLine(kyma, now));
  field('Webhook', webhookLine(kyma, now));
  field('Certificate', certificateLine(kyma.certificate, now));

  lines.push('', 'Conditions:');
  lines.push(
    ...indent(
      kyma.conditions.length === 0
        ? ['none (no pass has written a status yet)']
        : columns(
            ['TYPE', 'STATUS', 'REASON', 'SINCE', 'MESSAGE'],
            kyma.conditions.map((c) => [
              c.type,
              c.status,
              c.reason || '-',
              age(c.lastTransitionTime, now),
              oneLine(c.message),
            ]),
          ),
    ),
  );
  lines.push('', 'Modules:');
  lines.push(
    ...indent(
      kyma.modules.length === 0
        ? ['none']
        : columns(
            ['MODULE', 'STATE', 'VERSION', 'CHANNEL', 'MANIFEST', 'LAST OPERATION', 'REASON'],
            kyma.modules.map((m) => [
              m.name,
              m.state,
              m.version ?? '-',
              m.channel ?? '-',
              m.manifest ? `${m.manifest.name} (${m.manifest.state})` : '-',
              m.manifest?.lastOperation
                ? `${oneLine(m.manifest.lastOperation)} (${age(m.manifest.lastUpdateTime, now)} ago)`
                : '-',
              oneLine(m.reason) || '-',
            ]),
          ),
    ),
  );
  lines.push('', `Events (last ${events.length}, oldest first):`);
  lines.push(
    ...indent(
      events.length === 0
        ? ['none']
        : columns(
            ['LAST SEEN', 'TYPE', 'REASON', 'COUNT', 'FROM', 'MESSAGE'],
            events.map((e) => [
              age(e.time, now),
              e.type,
              e.reason,
              String(e.count),
              e.from,
              oneLine(e.message),
            ]),
          ),
    ),
  );
  lines.push('', 'What to do:');
  if (advice.length === 0) {
    lines.push(
      kyma.state === 'Ready'
        ? '  nothing: the Kyma is Ready and nothing the agent records is wrong'
        : `  nothing named yet: state ${kyma.state}; watch it (kubectl skr status --watch) or ask for a pass (kubectl skr reconcile ${kyma.name} -n ${kyma.namespace})`,
    );
  }
  advice.forEach((item, i) => {
    const where = item.runbook.startsWith('Skr') ? ` (${RUNBOOK_DIR}/${item.runbook}.md)` : '';
    lines.push(`  ${i + 1}. ${item.runbook}${where}: ${item.because}`);
    lines.push(`     first step: ${item.firstStep}`);
  });
  if (notShown.length > 0) {
    lines.push('', 'Not shown:');
    for (const why of notShown) lines.push(`  ${why}`);
  }
  return lines.map((line) => `${line}\n`).join('');
}

function skrLine(kyma: KymaView, now: Date): string {
  const connected = kyma.condition(CONDITION_TYPES.skrConnected);
  if (!connected) return 'not reported yet (no pass reached the SKR step)';
  const since = `since ${age(connected.lastTransitionTime, now)}`;
  return connected.status === 'True'
    ? `connected (${oneLine(connected.message)}, ${since})`
    : `NOT connected: ${connected.reason}: ${oneLine(connected.message)} (${since})`;
}

function webhookLine(kyma: KymaView, now: Date): string {
  const mode = kyma.webhookUrl ? `runs outside the SKR at ${kyma.webhookUrl}` : 'in the SKR';
  const condition = kyma.condition(CONDITION_TYPES.skrWebhook);
  if (!condition) return `not reported (the agent's webhook registration is off or has not run); ${mode}`;
  const since = `since ${age(condition.lastTransitionTime, now)}`;
  return condition.status === 'True'
    ? `healthy: ${condition.reason}: ${oneLine(condition.message)} (${since}); ${mode}`
    : `UNHEALTHY: ${condition.reason}: ${oneLine(condition.message)} (${since}); ${mode}`;
}

function certificateLine(certificate: CertificateView | undefined, now: Date): string {
  if (!certificate) return '-';
  if (certificate.kind === 'missing')
    return `none in Secret ${certificate.secret} (the agent's webhook registration issues it)`;
  if (certificate.kind === 'unreadable') return `not shown: ${certificate.why}`;
  const left = certificate.notAfter.getTime() - now.getTime();
  const days = Math.floor(left / 86_400_000);
  const renewal = new Date(certificate.notAfter.getTime() - RENEW_BEFORE_MS);
  const when =
    left <= 0
      ? `EXPIRED at ${certificate.notAfter.toISOString()}`
      : `expires ${certificate.notAfter.toISOString()} (in ${days} d)`;
  const renew = left <= RENEW_BEFORE_MS ? 'renewal OVERDUE' : `renewal due ${renewal.toISOString()}`;
  return `${when}, ${renew}; CN ${certificate.commonName}, issuer ${certificate.issuer} (Secret ${certificate.secret})`;
}

function indent(lines: string[]): string[] {
  return lines.map((line) => `  ${line}`);
}

function oneLine(text: string | undefined): string {
  return (text ?? '').replace(/\s+/g, ' ').trim();
}
