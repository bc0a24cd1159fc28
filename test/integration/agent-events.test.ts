// The skr-agent binary with its mTLS listener on real planes: with requeues an hour apart, a Module CR
// edit in SKR 1 reaches its ModuleConfig only through a callback with SKR 1's identity, and SKR 2's
// ModuleConfig is untouched; identities without a Kyma are refused; a CA bundle changed on disk is
// picked up without a restart.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'chai';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { createTestCa } from '../../agent/test/support/listener-certs.js';
import { sendCallback, v2Body } from '../../agent/test/support/listener-client.js';
import { waitUntil } from '../support/eventually.js';
import { SAMPLE_MODULE_CR } from '../support/kcp-seed.js';
import { startListeningAgent, type ListeningAgent } from '../support/listening-agent.js';

const SKRS = ['skr1', 'skr2'] as const;
const SAMPLE = SAMPLE_MODULE_CR;

describe('skr-agent: callbacks through the mTLS listener wake exactly their Kyma', function () {
  this.timeout(240_000);
  let system: ListeningAgent;
  let listenerPort = 0;
  const moduleConfigOf = (skr: string) => system.moduleConfigOf(skr);
  const identity = (commonName: string, issuer = system.ca) => system.identity(commonName, { issuer });

  before(async () => {
    system = await startListeningAgent('agent-events', SKRS);
    listenerPort = system.listenerPort;
  });

  after(async () => {
    await system?.stop();
  });

  it("an edit in SKR 1 reaches only SKR 1's ModuleConfig, and only after SKR 1's callback", async () => {
    const reconciles = () => system.reconciles();
    await system.env
      .plane('skr1')
      .kubeConfig()
      .makeApiClient(CustomObjectsApi)
      .patchNamespacedCustomObject({
        ...SAMPLE,
        body: [{ op: 'replace', path: '/spec/greeting', value: 'edited in skr1' }],
      });
    // Marker, not a window: SKR 2's callback, sent after the edit, is reconciled; the agent has worked since the
    // edit and still has not mirrored it, because nothing told it about SKR 1.
    const reconcilesBefore = await reconciles();
    const marker = await sendCallback(listenerPort, identity('skr2'), { body: v2Body('sample') });
    expect(marker.status).to.equal(200);
    await waitUntil(
      'SKR 2 is reconciled after the edit',
      async () => (await reconciles()) > reconcilesBefore,
      30_000,
    );
    expect((await moduleConfigOf('skr1'))?.spec.resource.spec?.['greeting'], 'no trigger yet').to.not.equal(
      'edited in skr1',
    );
    const before2 = await moduleConfigOf('skr2');
    const answer = await sendCallback(listenerPort, identity('skr1'), { body: v2Body('sample') });
    expect(answer.status).to.equal(200);
    await waitUntil(
      "SKR 1's ModuleConfig follows the edit",
      async () => (await moduleConfigOf('skr1'))?.spec.resource.spec?.['greeting'] === 'edited in skr1',
      30_000,
    );
    const after2 = await moduleConfigOf('skr2');
    expect(after2?.metadata.resourceVersion, "SKR 2's ModuleConfig is untouched").to.equal(
      before2?.metadata.resourceVersion,
    );
  });

  it('refuses an identity without a Kyma (403) and a certificate from a foreign CA', async () => {
    const unknown = await sendCallback(listenerPort, identity('skr-unknown'), { body: v2Body('sample') });
    expect(unknown.status).to.equal(403);
    const foreign = createTestCa('foreign-ca');
    const refused = await sendCallback(listenerPort, identity('skr1', foreign), {
      body: v2Body('sample'),
    }).then(
      (a) => a.status,
      () => 'connection refused by TLS',
    );
    expect(refused).to.be.oneOf([401, 'connection refused by TLS']);
  });

  it('picks up a CA bundle changed on disk without a restart', async () => {
    const next = createTestCa('kcp-next-ca');
    const before = await sendCallback(listenerPort, identity('skr1', next), { body: v2Body('sample') }).then(
      (a) => a.status,
      () => 'refused',
    );
    expect(before).to.be.oneOf([401, 'refused']);
    await writeFile(join(system.dir, 'ca.crt'), `${system.ca.certPem}${next.certPem}`);
    await waitUntil(
      'a certificate from the added CA is accepted',
      async () =>
        (await sendCallback(listenerPort, identity('skr1', next), { body: v2Body('sample') }).then(
          (a) => a.status,
          () => 0,
        )) === 200,
      30_000,
    );
    expect(system.agent.output()).to.include('listener TLS material reloaded');
  });
});
