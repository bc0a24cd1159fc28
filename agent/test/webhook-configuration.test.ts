import { expect } from 'chai';
import type { Watcher } from '@skr-watcher/api';
import { inClusterResourcesFor } from '../src/registration/skr-resources.js';
import {
  INSTALLED_OBJECTS_WEBHOOK_NAME,
  MODULES_WEBHOOK_NAME,
  webhookConfigurationFor,
} from '../src/registration/webhook-configuration.js';

function watcher(name: string, field: 'spec' | 'status', labels: Record<string, string>): Watcher {
  return {
    apiVersion: 'operator.kyma-project.io/v1beta2',
    kind: 'Watcher',
    metadata: { name, namespace: 'kcp-system' },
    spec: {
      manager: 'lifecycle-manager',
      labelsToWatch: labels,
      resourceToWatch: { group: 'operator.kyma-project.io', version: 'v1beta2', resource: 'kymas' },
      field,
    },
  };
}

describe('SKR webhook configuration', () => {
  const ca = '-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n';

  it('has one webhook per Watcher (sorted, selector from labelsToWatch, /status for field status) and one for the Module CRs', () => {
    const config = webhookConfigurationFor({
      watchers: [watcher('zeta', 'status', { a: 'b' }), watcher('alpha', 'spec', { 'w/by': 'klm' })],
      moduleResources: [
        { group: 'operator.kyma-project.io', version: 'v1alpha1', resource: 'samples' },
        { group: 'operator.kyma-project.io', version: 'v1alpha1', resource: 'samples' },
      ],
      caBundlePem: ca,
      target: { kind: 'url', baseUrl: 'https://127.0.0.1:9443/' },
      timeoutSeconds: 30,
    });
    const hooks = config.webhooks ?? [];
    expect(hooks.map((h) => h.name)).to.deep.equal([
      'alpha.operator.kyma-project.io',
      'zeta.operator.kyma-project.io',
      MODULES_WEBHOOK_NAME,
    ]);
    const [alpha, zeta, modules] = hooks;
    expect(alpha?.objectSelector).to.deep.equal({ matchLabels: { 'w/by': 'klm' } });
    expect(alpha?.rules?.[0]?.resources).to.deep.equal(['kymas']);
    expect(zeta?.rules?.[0]?.resources).to.deep.equal(['kymas/status']);
    expect(modules?.rules).to.have.length(1);
    expect(modules?.rules?.[0]?.resources).to.deep.equal(['samples']);
    for (const hook of hooks) {
      expect(hook.clientConfig.url).to.equal('https://127.0.0.1:9443/validate/lifecycle-manager');
      expect(Buffer.from(hook.clientConfig.caBundle ?? '', 'base64').toString()).to.equal(ca);
      expect(hook).to.include({
        failurePolicy: 'Ignore',
        sideEffects: 'NoneOnDryRun',
        matchPolicy: 'Equivalent',
      });
      // Capped: the API server must never wait long on the webhook.
      expect(hook.timeoutSeconds).to.equal(10);
      expect(hook.rules?.[0]?.operations).to.deep.equal(['CREATE', 'UPDATE', 'DELETE']);
    }
  });

  it('with module installation, one more webhook sees updates and deletions of every object labelled managed-by: kyma', () => {
    const input = {
      watchers: [],
      moduleResources: [],
      caBundlePem: ca,
      target: { kind: 'url' as const, baseUrl: 'https://127.0.0.1:9443' },
    };
    expect(webhookConfigurationFor(input).webhooks).to.equal(undefined);
    const hooks = webhookConfigurationFor({ ...input, installedObjects: true }).webhooks ?? [];
    expect(hooks.map((h) => h.name)).to.deep.equal([INSTALLED_OBJECTS_WEBHOOK_NAME]);
    const [hook] = hooks;
    // One label selector and wildcards: no list of kinds to keep current; `*` leaves subresources (status) out.
    expect(hook?.objectSelector).to.deep.equal({
      matchLabels: { 'operator.kyma-project.io/managed-by': 'kyma' },
    });
    expect(hook?.rules).to.deep.equal([
      {
        apiGroups: ['*'],
        apiVersions: ['*'],
        resources: ['*'],
        operations: ['UPDATE', 'DELETE'],
        scope: '*',
      },
    ]);
    expect(hook).to.include({ failurePolicy: 'Ignore', sideEffects: 'NoneOnDryRun', timeoutSeconds: 5 });
    // Upstream's path and manager: its listener takes the callback like any other.
    expect(hook?.clientConfig.url).to.equal('https://127.0.0.1:9443/validate/lifecycle-manager');
  });

  it('points at the in-cluster Service in service mode and leaves out the module webhook when no module is enabled', () => {
    const config = webhookConfigurationFor({
      watchers: [watcher('w', 'spec', {})],
      moduleResources: [],
      caBundlePem: ca,
      target: { kind: 'service', namespace: 'kyma-system', name: 'skr-webhook', port: 443 },
    });
    expect(config.webhooks).to.have.length(1);
    expect(config.webhooks?.[0]?.clientConfig.service).to.deep.equal({
      namespace: 'kyma-system',
      name: 'skr-webhook',
      port: 443,
      path: '/validate/lifecycle-manager',
    });
  });

  it('passes --skr-webhook-kcp-server-cn to the webhook Deployment as KCP_SERVER_CN, and nothing when unset', () => {
    const envOf = (kcpServerCn?: string) => {
      const deployment = inClusterResourcesFor({
        image: 'registry.local/skr-watcher:test',
        kcpAddress: 'skr-events.kcp.example.com:443',
        kcpServerCn,
        certificateChecksum: 'abc',
      }).find((object) => object.kind === 'Deployment') as unknown as {
        spec: { template: { spec: { containers: { env: { name: string; value: string }[] }[] } } };
      };
      return deployment.spec.template.spec.containers[0]?.env ?? [];
    };
    expect(envOf('*')).to.deep.include({ name: 'KCP_SERVER_CN', value: '*' });
    expect(envOf().map((entry) => entry.name)).to.not.include('KCP_SERVER_CN');
  });
});
