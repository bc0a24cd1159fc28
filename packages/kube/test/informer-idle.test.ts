// An idle informer holds its watch on a real API server: with nothing changing, the server sends a watch only a
// bookmark every minute or two, and the watch stays open through the silence in between (client-node's own 30 s
// silence bound used to cut it). Counted by the API server itself: completed WATCH requests of the watched kinds.
import { expect } from 'chai';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, KINDS, type Kyma } from '@skr-watcher/api';
import { createRegistry } from '@skr-watcher/telemetry';
import { startEnvironment, type Environment } from '@skr-watcher/testenv';
import { ResilientInformer, customResourceSource, metadataOnly } from '../src/informer.js';
import { apiserverMetrics, growth, labelOf } from '../../../test/support/apiserver-metrics.js';
import { waitUntil } from '../../../test/support/eventually.js';

/** Longer than a bookmark's interval (a minute, once the watch cache saw an event) and two of client-node's 30 s. */
const QUIET_WINDOW_MS = 80_000;

describe('an idle informer on a real API server', function () {
  this.timeout(240_000);
  let env: Environment;
  let kubeConfig: KubeConfig;
  const namespace = `idle-${Date.now()}`;

  before(async () => {
    env = await startEnvironment({ planes: ['kcp'] });
    kubeConfig = env.plane('kcp').kubeConfig();
    await kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
  });

  after(async () => {
    await env?.stop();
  });

  it('holds its watches through a quiet window longer than a minute: no WATCH request ends, and the next change arrives', async () => {
    const registry = createRegistry();
    const kymas = new ResilientInformer<Kyma>({
      kubeConfig,
      source: customResourceSource(kubeConfig, {
        group: GROUP,
        version: KINDS.kyma.version,
        plural: KINDS.kyma.plural,
        namespace,
      }),
      registry,
    });
    const templates = new ResilientInformer({
      kubeConfig,
      source: metadataOnly(
        kubeConfig,
        customResourceSource(kubeConfig, {
          group: GROUP,
          version: KINDS.moduleTemplate.version,
          plural: KINDS.moduleTemplate.plural,
          namespace,
        }),
      ),
      registry,
    });
    const informers = [kymas, templates];
    const ended = (key: string) =>
      labelOf(key, 'verb') === 'WATCH' &&
      labelOf(key, 'group') === GROUP &&
      [KINDS.kyma.plural as string, KINDS.moduleTemplate.plural].includes(labelOf(key, 'resource'));
    try {
      for (const informer of informers) informer.start();
      await Promise.all(informers.map((informer) => informer.waitForSync()));
      const before = await apiserverMetrics(kubeConfig);
      await new Promise((resolve) => setTimeout(resolve, QUIET_WINDOW_MS));
      const after = await apiserverMetrics(kubeConfig);
      const watchesEnded = [...growth(before, after, ended)].map(
        ([key, n]) => `${labelOf(key, 'resource')} ${labelOf(key, 'code')}: ${n}`,
      );
      expect(watchesEnded, 'WATCH requests the API server completed during the quiet window').to.deep.equal(
        [],
      );
      const restarts = (await registry.getSingleMetric('informer_watch_restarts_total')?.get())?.values ?? [];
      expect(restarts.filter((value) => value.value > 0)).to.deep.equal([]);

      // The watch that was held is alive: a change arrives on it.
      await kubeConfig.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
        group: GROUP,
        version: KINDS.kyma.version,
        plural: KINDS.kyma.plural,
        namespace,
        body: {
          apiVersion: `${GROUP}/${KINDS.kyma.version}`,
          kind: 'Kyma',
          metadata: { name: 'after-the-quiet', namespace },
          spec: { channel: 'regular', modules: [] },
        },
      });
      await waitUntil(
        'the Kyma created after the quiet window is cached',
        async () => kymas.get(`${namespace}/after-the-quiet`) !== undefined,
      );
    } finally {
      await Promise.all(informers.map((informer) => informer.stop()));
    }
  });
});
