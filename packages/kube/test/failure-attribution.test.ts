// Which cluster a failed request belongs to: two clients of two silent TLS servers, each recognising only its own
// failures, however deep a caller wrapped them. A socket error names no cluster; the client that sent it does.
import { expect } from 'chai';
import { createClusterClient, kubeConfigFromYaml, type ClusterClient } from '../src/index.js';
import { neverAnswers, startHostileSkr, type HostileSkr } from '../../../test/support/hostile-skr.js';

describe('failure attribution (two clients, two silent TLS servers)', function () {
  let servers: HostileSkr[];
  let kcp: ClusterClient;
  let skr: ClusterClient;

  before(async function () {
    servers = [await startHostileSkr(neverAnswers), await startHostileSkr(neverAnswers)];
    kcp = await createClusterClient(kubeConfigFromYaml(servers[0]!.kubeconfig, 'kcp'), {
      name: 'kcp',
      timeoutMs: 200,
    });
    skr = await createClusterClient(kubeConfigFromYaml(servers[1]!.kubeconfig, 'skr'), {
      name: 'skr',
      timeoutMs: 200,
    });
  });
  after(async function () {
    await kcp?.close();
    await skr?.close();
    for (const server of servers ?? []) await server.close();
  });

  async function failureOf(client: ClusterClient): Promise<unknown> {
    try {
      await client.core.listNamespace();
    } catch (error) {
      return error;
    }
    throw new Error(`${client.name}: the request to a silent server succeeded`);
  }

  it("tells each client's timed-out request apart, also when wrapped by callers", async function () {
    const kcpFailure = await failureOf(kcp);
    const skrFailure = await failureOf(skr);
    expect(kcp.failedRequest(kcpFailure)).to.equal(true);
    expect(kcp.failedRequest(skrFailure)).to.equal(false);
    expect(skr.failedRequest(skrFailure)).to.equal(true);
    expect(skr.failedRequest(kcpFailure)).to.equal(false);
    const wrapped = new Error('apply Manifest x', {
      cause: new Error('install module', { cause: kcpFailure }),
    });
    expect(kcp.failedRequest(wrapped)).to.equal(true);
    expect(skr.failedRequest(wrapped)).to.equal(false);
  });

  it('claims no error it did not throw', function () {
    expect(kcp.failedRequest(new Error('ECONNREFUSED'))).to.equal(false);
    expect(kcp.failedRequest(undefined)).to.equal(false);
    expect(kcp.failedRequest('timeout')).to.equal(false);
  });
});
