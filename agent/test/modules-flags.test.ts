// skr-agent run's module-installation flags (upstream lifecycle-manager's names): off without --oci-registry-host,
// the other flags refused without it, a scheme other than http(s) refused, the cache bound parsed.
import { expect } from 'chai';
import { agentConfigFromFlags, ConfigError, DEFAULT_MODULE_CACHE_BYTES } from '../src/config.js';
import { failureBackoff } from '../src/reconcile/manifests/source.js';
import { testRunFlags } from './support/run-flags.js';

describe('module installation flags', function () {
  it('is off without --oci-registry-host', function () {
    expect(agentConfigFromFlags(testRunFlags('kcp-system')).modules).to.equal(undefined);
  });

  it('takes the registry, the subpath, the credential Secret and the cache bound', function () {
    const config = agentConfigFromFlags(
      testRunFlags('kcp-system', {
        ociRegistryHost: 'http://registry.local:5000',
        modulesRepositorySubpath: 'team/modules',
        ociRegistryCredSecret: 'module-registry',
        skrImagePullSecret: 'module-images',
        moduleCacheBytes: '1048576',
      }),
    );
    expect(config.modules).to.deep.include({
      registryHost: 'http://registry.local:5000',
      repositorySubpath: 'team/modules',
      credSecret: 'module-registry',
      skrImagePullSecret: 'module-images',
      cacheBytes: 1_048_576,
    });
    expect(
      agentConfigFromFlags(testRunFlags('kcp-system', { ociRegistryHost: 'registry.local' })).modules
        ?.cacheBytes,
    ).to.equal(DEFAULT_MODULE_CACHE_BYTES);
  });

  it('refuses the other flags without a host, and a scheme that is not http(s)', function () {
    expect(() =>
      agentConfigFromFlags(testRunFlags('kcp-system', { ociRegistryCredSecret: 'module-registry' })),
    ).to.throw(ConfigError, /--oci-registry-cred-secret needs --oci-registry-host/);
    expect(() =>
      agentConfigFromFlags(testRunFlags('kcp-system', { skrImagePullSecret: 'module-images' })),
    ).to.throw(ConfigError, /--skr-image-pull-secret needs --oci-registry-host/);
    expect(() =>
      agentConfigFromFlags(
        testRunFlags('kcp-system', {
          ociRegistryHost: 'registry.local',
          skrImagePullSecret: 'Module_Images',
        }),
      ),
    ).to.throw(ConfigError, /--skr-image-pull-secret: expected a Secret name/);
    expect(() =>
      agentConfigFromFlags(testRunFlags('kcp-system', { ociRegistryHost: 'oci://registry.local' })),
    ).to.throw(ConfigError, /--oci-registry-host/);
  });

  it('answers a failure again without trying until its backoff passed, then tries', async function () {
    let now = 0;
    let calls = 0;
    const attempt = failureBackoff({ transientMs: 1_000, permanentMs: 10_000, maxMs: 60_000 }, () => now);
    const failing = () => {
      calls += 1;
      return Promise.reject(new Error('registry down'));
    };
    await attempt('k', failing).catch(() => undefined);
    await attempt('k', failing).catch(() => undefined);
    expect(calls).to.equal(1);
    now = 1_001;
    await attempt('k', failing).catch(() => undefined);
    expect(calls).to.equal(2);
    // The second failure waits twice as long.
    now = 2_500;
    await attempt('k', failing).catch(() => undefined);
    expect(calls).to.equal(2);
    now = 3_002;
    expect(await attempt('k', () => Promise.resolve('ok'))).to.equal('ok');
  });
});
