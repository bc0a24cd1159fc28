// What the console shows, read from KCP with the agent's own client: the Kymas and Manifests of the namespace for the
// overview, one Kyma with its Manifests, webhook certificate and Events for a Kyma's page. The views themselves are
// the ones `kubectl skr status` and `explain` print (packages/api fleet-view), so both always agree.
import { ApiException, CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import {
  GROUP,
  KINDS,
  LABELS,
  adviceFor,
  fleetReport,
  foundCertificate,
  kymaEvents,
  kymaView,
  readKyma,
  readManifests,
  viewData,
  type CertificateView,
  type FleetReport,
  type KymaEvent,
} from '@skr-watcher/api';
import { listInPages } from '@skr-watcher/kube';
import { describeCertificate, webhookTlsSecretName, SECRET_KEYS } from '@skr-watcher/pki';

/** The overview as JSON: the fleet report with each row as data. */
export type FleetData = Omit<FleetReport, 'rows'> & { rows: Record<string, unknown>[] };

/** A Kyma's page as JSON. */
export interface KymaPageData {
  kyma: Record<string, unknown>;
  events: KymaEvent[];
  advice: ReturnType<typeof adviceFor>;
  notShown: string[];
}

export interface FleetSource {
  fleet(): Promise<FleetData>;
  /** undefined when there is no such Kyma. */
  kyma(name: string, now: Date): Promise<KymaPageData | undefined>;
}

/** How many of a Kyma's Events its page lists, as `kubectl skr explain` does by default. */
const LAST_EVENTS = 10;

export function kcpFleetSource(kubeConfig: KubeConfig, namespace: string): FleetSource {
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const ref = (kind: 'kyma' | 'manifest') => ({
    group: GROUP,
    version: KINDS[kind].version,
    plural: KINDS[kind].plural,
    namespace,
  });
  const list = (kind: 'kyma' | 'manifest', labelSelector?: string) =>
    listInPages<unknown, unknown>(
      async ({ limit, continueToken }) =>
        (await custom.listNamespacedCustomObject({
          ...ref(kind),
          limit,
          ...(continueToken ? { _continue: continueToken } : {}),
          ...(labelSelector ? { labelSelector } : {}),
        })) as { items: unknown[]; metadata?: { continue?: string } },
      (item) => item,
    ).catch((cause: unknown) => {
      throw new Error(`list ${KINDS[kind].plural} in ${namespace}`, { cause });
    });

  const certificateOf = async (kyma: string): Promise<CertificateView> => {
    const secret = webhookTlsSecretName(kyma);
    try {
      const read = await core.readNamespacedSecret({ namespace, name: secret });
      const pem = read.data?.[SECRET_KEYS.cert];
      if (!pem) return { kind: 'missing', secret };
      return foundCertificate(secret, describeCertificate(Buffer.from(pem, 'base64').toString('utf8')));
    } catch (error) {
      if (error instanceof ApiException && error.code === 404) return { kind: 'missing', secret };
      return { kind: 'unreadable', secret, why: error instanceof Error ? error.message : String(error) };
    }
  };

  return {
    async fleet() {
      const [kymas, manifests] = await Promise.all([list('kyma'), list('manifest')]);
      const report = fleetReport(namespace, kymas, manifests);
      return { ...report, rows: report.rows.map(viewData) };
    },
    async kyma(name, now) {
      let object: unknown;
      try {
        object = await custom.getNamespacedCustomObject({ ...ref('kyma'), name });
      } catch (error) {
        if (error instanceof ApiException && error.code === 404) return undefined;
        throw new Error(`get Kyma ${namespace}/${name}`, { cause: error });
      }
      const notShown: string[] = [];
      const [manifests, certificate, events] = await Promise.all([
        list('manifest', `${LABELS.kymaName}=${name}`),
        certificateOf(name),
        core
          .listNamespacedEvent({
            namespace,
            fieldSelector: `involvedObject.name=${name},involvedObject.kind=${KINDS.kyma.kind}`,
          })
          .then((answer) => kymaEvents(answer.items))
          .catch((error: unknown) => {
            notShown.push(`Events: ${error instanceof ApiException ? `HTTP ${error.code}` : String(error)}`);
            return [] as KymaEvent[];
          }),
      ]);
      const view = kymaView(readKyma(object), readManifests(manifests));
      view.certificate = certificate;
      return {
        kyma: viewData(view),
        events: events.slice(-LAST_EVENTS),
        advice: adviceFor(view, now),
        notShown,
      };
    },
  };
}
