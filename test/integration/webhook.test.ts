// The SKR webhook behind a real kube-apiserver (skr1): writes of Kymas and Samples reach a real mTLS
// KCP stand-in as exactly the expected v2 events; KCP outages and certificate swaps lose nothing.
import { randomBytes } from 'node:crypto';
import { request as httpsRequest, type RequestOptions } from 'node:https';
import { expect } from 'chai';
import {
  AdmissionregistrationV1Api,
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
} from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS, type WatchEventV2 } from '@skr-watcher/api';
import { sharedEnvironment } from '@skr-watcher/testenv';
import { secretFiles } from '../../webhook/test/support/certs.js';
import type { ReceivedEvent } from '../../webhook/test/support/kcp-listener.js';
import { waitUntil } from '../support/eventually.js';
import {
  callWebhook,
  getMetricsPort,
  metricValue,
  startWebhookFixture,
  type WebhookFixture,
} from '../../webhook/test/support/webhook-fixture.js';

type Plural = 'kymas' | 'samples';
type KubeObject = Record<string, unknown> & {
  metadata: Record<string, unknown>;
  spec?: Record<string, unknown>;
};

const KIND_OF: Record<Plural, { kind: string; version: string }> = {
  kymas: KINDS.kyma,
  samples: KINDS.sample,
};

function expectedEvent(plural: Plural, namespace: string, name: string): WatchEventV2 {
  const { kind, version } = KIND_OF[plural];
  return { watched: { Namespace: namespace, Name: name }, watchedGvk: { group: GROUP, version, kind } };
}

function eventsFor(
  received: ReceivedEvent[],
  plural: Plural,
  namespace: string,
  name: string,
): WatchEventV2[] {
  const wanted = expectedEvent(plural, namespace, name);
  return received
    .map((r) => r.event)
    .filter(
      (e) =>
        e.watched.Name === name &&
        e.watched.Namespace === namespace &&
        e.watchedGvk.kind === wanted.watchedGvk.kind,
    );
}

/**
 * What the webhook has counted so far. A scrape first hands every change the admission side took to the
 * dispatch thread and reads its counts after them, so a scrape made after a write's API call returned
 * includes that write's change, if it was one: comparing counts proves "nothing was sent" without a wait.
 */
async function webhookCounts(
  metricsPort: number,
): Promise<{ admitted: number; changes: number; retries: number }> {
  const text = (await getMetricsPort(metricsPort, '/metrics')).body;
  const value = (sample: string) => metricValue(text, sample) ?? 0;
  return {
    admitted: value('skr_webhook_admission_requests_total{code="200"}'),
    // Every relevant change either makes a queue entry or joins one.
    changes: value('skr_webhook_events_enqueued_total') + value('skr_webhook_events_coalesced_total'),
    retries: value('skr_webhook_callback_duration_seconds_count{outcome="retry"}'),
  };
}

/** A request with a body given as JSON text: client-node would JSON.stringify it, which overflows on deep objects. */
async function rawRequest(
  kubeConfig: KubeConfig,
  method: string,
  path: string,
  contentType: string,
  text: string,
): Promise<{ status: number; body: string }> {
  const server = new URL(kubeConfig.getCurrentCluster()?.server ?? '');
  const options: RequestOptions = {
    host: server.hostname,
    port: server.port,
    method,
    path,
    headers: { 'content-type': contentType, 'content-length': Buffer.byteLength(text) },
  };
  await kubeConfig.applyToHTTPSOptions(options);
  return new Promise((resolve, reject) => {
    const req = httpsRequest(options, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8').slice(0, 500) }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(text);
  });
}

describe('skr-webhook on a real SKR API server', function () {
  this.timeout(180_000);
  const suffix = randomBytes(4).toString('hex');
  const namespace = `webhook-it-${suffix}`;
  const watchedBy = `webhook-it-${suffix}`;
  const configName = `skr-webhook-it-${suffix}`;
  let fx: WebhookFixture;
  let objects: CustomObjectsApi;
  let admissionApi: AdmissionregistrationV1Api;
  let skrConfig: KubeConfig;

  const labelled = (extra: Record<string, string> = {}) => ({ [LABELS.watchedBy]: watchedBy, ...extra });
  const counts = () => webhookCounts(fx.webhook.metricsPort);

  function body(
    plural: Plural,
    name: string,
    labels: Record<string, string>,
    spec: Record<string, unknown>,
  ): KubeObject {
    const { kind, version } = KIND_OF[plural];
    return { apiVersion: `${GROUP}/${version}`, kind, metadata: { name, namespace, labels }, spec };
  }
  const create = (plural: Plural, object: KubeObject) =>
    objects.createNamespacedCustomObject({
      group: GROUP,
      version: KIND_OF[plural].version,
      namespace,
      plural,
      body: object,
    });
  const read = async (plural: Plural, name: string) =>
    (await objects.getNamespacedCustomObject({
      group: GROUP,
      version: KIND_OF[plural].version,
      namespace,
      plural,
      name,
    })) as KubeObject;
  const replace = (plural: Plural, object: KubeObject) =>
    objects.replaceNamespacedCustomObject({
      group: GROUP,
      version: KIND_OF[plural].version,
      namespace,
      plural,
      name: object.metadata['name'] as string,
      body: object,
    });
  const replaceStatus = (plural: Plural, object: KubeObject) =>
    objects.replaceNamespacedCustomObjectStatus({
      group: GROUP,
      version: KIND_OF[plural].version,
      namespace,
      plural,
      name: object.metadata['name'] as string,
      body: object,
    });
  const remove = (plural: Plural, name: string) =>
    objects.deleteNamespacedCustomObject({
      group: GROUP,
      version: KIND_OF[plural].version,
      namespace,
      plural,
      name,
    });

  /** A labelled write that must send one event; resolves once KCP has it. */
  async function marker(name: string): Promise<void> {
    await create('samples', body('samples', name, labelled(), { replicas: 1 }));
    await fx.kcp.waitFor(
      (r) => eventsFor(r, 'samples', namespace, name).length > 0,
      10_000,
      `marker ${name}`,
    );
  }

  before(async () => {
    const env = await sharedEnvironment();
    const skr = env.plane('skr1').kubeConfig();
    skrConfig = skr;
    objects = skr.makeApiClient(CustomObjectsApi);
    admissionApi = skr.makeApiClient(AdmissionregistrationV1Api);
    await skr.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });

    fx = await startWebhookFixture({ workers: 2 });
    await admissionApi.createValidatingWebhookConfiguration({
      body: {
        metadata: { name: configName },
        webhooks: [
          {
            name: `kyma-and-samples.${suffix}.webhook-it.kyma-project.io`,
            clientConfig: {
              url: `https://127.0.0.1:${fx.webhook.webhookPort}/validate/lifecycle-manager`,
              caBundle: Buffer.from(fx.pki.ca.certPem).toString('base64'),
            },
            rules: [
              {
                apiGroups: [GROUP],
                apiVersions: ['*'],
                operations: ['CREATE', 'UPDATE', 'DELETE'],
                resources: ['kymas', 'kymas/status', 'samples', 'samples/status'],
                scope: 'Namespaced',
              },
            ],
            // Only this suite's objects: other suites share the plane.
            objectSelector: { matchLabels: { [LABELS.watchedBy]: watchedBy } },
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } },
            failurePolicy: 'Ignore',
            sideEffects: 'None',
            admissionReviewVersions: ['v1'],
            timeoutSeconds: 10,
          },
        ],
      },
    });

    // The API server picks webhook configurations up through an informer: write until one is seen.
    for (let attempt = 0; ; attempt++) {
      const name = `probe-${attempt}`;
      await create('samples', body('samples', name, labelled(), { replicas: 0 }));
      try {
        await fx.kcp.waitFor(
          (r) => eventsFor(r, 'samples', namespace, name).length > 0,
          1_000,
          `probe ${name}`,
        );
        break;
      } catch (error) {
        if (attempt >= 30) throw new Error('the API server never called the webhook', { cause: error });
      }
    }
  });

  after(async () => {
    await admissionApi?.deleteValidatingWebhookConfiguration({ name: configName }).catch((error: unknown) => {
      if (!(error instanceof ApiException && error.code === 404)) throw error;
    });
    await fx?.stop();
  });

  for (const plural of ['kymas', 'samples'] as const) {
    it(`${plural}: create, spec update, status update, no-op update and delete send exactly 4 events`, async () => {
      const name = `journey-${plural}`;
      const spec =
        plural === 'kymas' ? { channel: 'regular', modules: [{ name: 'sample' }] } : { replicas: 1 };
      const wait = (count: number, what: string) =>
        fx.kcp.waitFor(
          (r) => eventsFor(r, plural, namespace, name).length >= count,
          10_000,
          `${what} of ${name}`,
        );

      const before = await counts();
      await create(plural, body(plural, name, labelled(), spec));
      await wait(1, 'create');

      const created = await read(plural, name);
      const createdMeta = created.metadata as { uid: string; resourceVersion: string };
      const changedSpec =
        plural === 'kymas' ? { channel: 'fast', modules: [{ name: 'sample' }] } : { replicas: 2 };
      await replace(plural, { ...created, spec: changedSpec });
      await wait(2, 'spec update');

      const updated = await read(plural, name);
      const updatedMeta = updated.metadata as { resourceVersion: string; generation: number };
      await replaceStatus(plural, { ...updated, status: { state: 'Ready' } });
      await wait(3, 'status update');

      const withStatus = await read(plural, name);
      await replace(plural, withStatus);
      await replaceStatus(plural, withStatus);
      // A label is metadata, not spec: not relevant either.
      await replace(plural, {
        ...withStatus,
        metadata: { ...withStatus.metadata, labels: labelled({ extra: 'x' }) },
      });

      await remove(plural, name);
      await wait(4, 'delete');
      const after = await counts();
      // The irrelevant writes did reach the webhook: 7 writes, 7 reviews answered; 4 of them were changes.
      expect(after.admitted - before.admitted, 'reviews answered').to.equal(7);
      expect(after.changes - before.changes, 'changes taken for sending').to.equal(4);
      const events = eventsFor(fx.kcp.received, plural, namespace, name);
      expect(events).to.have.length(4);
      for (const event of events) {
        const { watched, watchedGvk } = event;
        expect({ watched, watchedGvk }).to.deep.equal(expectedEvent(plural, namespace, name));
        expect(event.uid).to.equal(createdMeta.uid);
      }
      // The fingerprint as the real API server fills it in before validating admission (decision 010):
      // generation already counts the spec change; the resourceVersion is the one before the write.
      expect(events[0]).to.deep.include({ generation: 1 }).and.not.have.property('previousResourceVersion');
      expect(events[1]).to.deep.include({
        generation: 2,
        previousResourceVersion: createdMeta.resourceVersion,
      });
      expect(updatedMeta.generation).to.equal(2);
      expect(events[2]).to.deep.include({
        generation: 2,
        previousResourceVersion: updatedMeta.resourceVersion,
      });
      expect(events[3]?.previousResourceVersion).to.be.a('string');
    });
  }

  it('deleting an object with a finalizer sends one event for the DELETE, none when the finalizer goes', async () => {
    const name = 'with-finalizer';
    const object = body('samples', name, labelled(), { replicas: 1 });
    object.metadata['finalizers'] = ['webhook-it.kyma-project.io/hold'];
    await create('samples', object);
    // The create's event first: a DELETE that arrives while the create's event still waits is coalesced into it
    // (one event, the latest), which is the queue's design, not what this test is about.
    await fx.kcp.waitFor((r) => eventsFor(r, 'samples', namespace, name).length >= 1, 10_000, 'create');
    await remove('samples', name);
    await fx.kcp.waitFor(
      (r) => eventsFor(r, 'samples', namespace, name).length >= 2,
      10_000,
      'create and delete',
    );
    const terminating = await read('samples', name);
    expect(terminating.metadata['deletionTimestamp']).to.be.a('string');
    const before = await counts();
    await replace('samples', { ...terminating, metadata: { ...terminating.metadata, finalizers: [] } });
    await marker('after-finalizer');
    const after = await counts();
    expect(after.admitted - before.admitted, 'the finalizer removal and the marker were reviewed').to.equal(
      2,
    );
    expect(after.changes - before.changes, 'changes taken: the marker alone').to.equal(1);
    expect(eventsFor(fx.kcp.received, 'samples', namespace, name)).to.have.length(2);
  });

  it('a Sample nested 9,000 levels deep: stored, reviewed and sent; the webhook keeps answering', async () => {
    const nested = (leaf: string) => `${'{"x":'.repeat(9_000)}"${leaf}"${'}'.repeat(9_000)}`;
    const path = `/apis/${GROUP}/${KINDS.sample.version}/namespaces/${namespace}/samples`;
    const object = JSON.stringify(body('samples', 'deep', labelled(), { replicas: 1, deep: 'DEEP' }));
    const created = await rawRequest(
      skrConfig,
      'POST',
      path,
      'application/json',
      object.replace('"DEEP"', nested('a')),
    );
    expect(created.status, created.body).to.equal(201);
    const patch = `{"spec":{"deep":${nested('b')}}}`;
    const patched = await rawRequest(
      skrConfig,
      'PATCH',
      `${path}/deep`,
      'application/merge-patch+json',
      patch,
    );
    expect(patched.status, patched.body).to.equal(200);
    await fx.kcp.waitFor(
      (r) => eventsFor(r, 'samples', namespace, 'deep').length >= 2,
      10_000,
      'create and update of the deep Sample',
    );
    await marker('after-deep');
  });

  it('objects outside the label selector send nothing', async () => {
    const before = await counts();
    await create('samples', body('samples', 'unlabelled', {}, { replicas: 1 }));
    await create(
      'samples',
      body('samples', 'other-manager', { [LABELS.watchedBy]: `someone-else-${suffix}` }, { replicas: 1 }),
    );
    await create('kymas', body('kymas', 'unlabelled', {}, { channel: 'regular' }));
    await marker('marker');
    const after = await counts();
    // The API server's selectors keep them from the webhook: only the marker was reviewed and taken.
    expect(after.admitted - before.admitted, 'reviews answered').to.equal(1);
    expect(after.changes - before.changes, 'changes taken').to.equal(1);
    const names = fx.kcp.received.map((r) => r.event.watched.Name);
    expect(names).to.not.include('unlabelled');
    expect(names).to.not.include('other-manager');
  });

  it('a server-side dry run reaches the webhook but sends nothing', async () => {
    const before = await counts();
    await objects.createNamespacedCustomObject({
      group: GROUP,
      version: KINDS.sample.version,
      namespace,
      plural: 'samples',
      body: body('samples', 'dry-run', labelled(), { replicas: 1 }),
      dryRun: 'All',
    });
    expect((await counts()).admitted - before.admitted, 'the dry run was reviewed').to.equal(1);
    await marker('after-dry-run');
    expect((await counts()).changes - before.changes, 'changes taken: the marker alone').to.equal(1);
    expect(eventsFor(fx.kcp.received, 'samples', namespace, 'dry-run')).to.deep.equal([]);
  });

  it('KCP down: writes succeed without waiting on KCP, and the queued events arrive once it is back', async () => {
    const port = fx.kcp.port;
    const before = await counts();
    await fx.kcp.stop();
    const names = ['down-0', 'down-1', 'down-2'];
    const durations: number[] = [];
    for (const name of names) {
      const started = performance.now();
      await create('samples', body('samples', name, labelled(), { replicas: 1 }));
      durations.push(performance.now() - started);
    }
    const first = await read('samples', 'down-0');
    const started = performance.now();
    await replace('samples', { ...first, spec: { replicas: 5 } });
    durations.push(performance.now() - started);
    // Not a benchmark: a webhook that waited on KCP would hold each write for its 10 s timeout.
    expect(Math.max(...durations), `write durations ${durations.map(Math.round).join(', ')} ms`).to.be.below(
      5_000,
    );

    // The webhook has tried KCP and failed, and holds the events rather than dropping them.
    await waitUntil(
      'a failed callback while KCP is down',
      async () => (await counts()).retries > before.retries,
      10_000,
    );
    expect(fx.kcp.received.filter((r) => names.includes(r.event.watched.Name))).to.have.length(0);
    expect(await fx.webhook.queueDepth()).to.be.at.least(3);

    await fx.kcp.start(port);
    await fx.kcp.waitFor(
      (r) => names.every((name) => eventsFor(r, 'samples', namespace, name).length > 0),
      15_000,
      'the events queued while KCP was down',
    );
    // down-0 was created and then changed while queued: one coalesced event covers both.
    expect(eventsFor(fx.kcp.received, 'samples', namespace, 'down-0')).to.have.length(1);
    expect(fx.webhook.dispatchStats.dropped).to.deep.equal({
      queue_full: 0,
      max_age: 0,
      rejected: 0,
      shutdown: 0,
      invalid: 0,
    });
  });

  it('certificate files replaced during traffic: no failed admission, no failed callback', async () => {
    const before = await counts();
    const firstSerial = (await callWebhook(fx.webhook.webhookPort, fx.pki.ca.certPem, { body: '{}' }))
      .serverSerial;

    let stop = false;
    const created: string[] = [];
    const traffic = (async () => {
      for (let i = 0; !stop; i++) {
        const name = `rotate-${i}`;
        await create('samples', body('samples', name, labelled(), { replicas: 1 }));
        created.push(name);
      }
    })();
    // Writes before the swap, and more after the new certificate serves.
    await waitUntil('three writes before the swap', () => Promise.resolve(created.length >= 3), 30_000, 20);
    await fx.volume.update(secretFiles(fx.pki.leaf('skr-rotated'), fx.pki.ca.certPem));
    await fx.kcp.waitFor(
      (r) => r.some((e) => e.clientCn === 'skr-rotated'),
      10_000,
      'a callback with the new client certificate',
    );
    const secondSerial = (await callWebhook(fx.webhook.webhookPort, fx.pki.ca.certPem, { body: '{}' }))
      .serverSerial;
    const createdBeforeSecond = created.length;
    await waitUntil(
      'three writes after the new certificate serves',
      () => Promise.resolve(created.length >= createdBeforeSecond + 3),
      30_000,
      20,
    );
    stop = true;
    await traffic;

    expect(secondSerial).to.not.equal(firstSerial);
    expect(created.length).to.be.greaterThan(3);
    await fx.kcp.waitFor(
      (r) => created.every((name) => eventsFor(r, 'samples', namespace, name).length === 1),
      10_000,
      'one event for every object created during the swap',
    );
    const after = await counts();
    expect(after.retries, 'failed callbacks').to.equal(before.retries);
    // Every write was admitted by the webhook itself (failurePolicy Ignore would hide a failed call otherwise).
    expect(after.admitted - before.admitted).to.be.at.least(created.length);
    expect(fx.kcp.invalid).to.deep.equal([]);
  });
});
