// Upstream's registry flags and credential Secret, read as lifecycle-manager reads them.
import { expect } from 'chai';
import fc from 'fast-check';
import { parseChallenge, registryConfigFromFlags } from '../src/index.js';

const dockerConfig = (auths: Record<string, object>) => JSON.stringify({ auths });

describe('registry configuration from upstream flags', () => {
  it('joins host and subpath with one slash; http:// means plain HTTP; the scheme never reaches the reference', () => {
    expect(
      registryConfigFromFlags({
        ociRegistryHost: 'http://127.0.0.1:5000/',
        modulesRepositorySubpath: '/kyma/modules/',
      }).location,
    ).to.deep.equal({
      reference: '127.0.0.1:5000/kyma/modules',
      host: '127.0.0.1:5000',
      basePath: 'kyma/modules',
      insecure: true,
    });
    expect(
      registryConfigFromFlags({
        ociRegistryHost: 'europe-west3-docker.pkg.dev/sap-kyma-jellyfish-dev',
        modulesRepositorySubpath: 'template-operator',
      }).location,
    ).to.deep.include({
      reference: 'europe-west3-docker.pkg.dev/sap-kyma-jellyfish-dev/template-operator',
      insecure: false,
    });
  });

  it('takes host and credentials from a Secret with exactly one auths entry', () => {
    const config = registryConfigFromFlags({
      dockerConfigJson: dockerConfig({
        'https://registry.example:443/path': { auth: Buffer.from('robot:p:w').toString('base64') },
      }),
    });
    expect(config.location.reference).to.equal('registry.example:443/path');
    expect(config.credentials).to.deep.equal({ kind: 'basic', username: 'robot', password: 'p:w' });
    expect(
      registryConfigFromFlags({ dockerConfigJson: dockerConfig({ r: { username: 'u', password: 'p' } }) })
        .credentials,
    ).to.deep.equal({ kind: 'basic', username: 'u', password: 'p' });
  });

  it('refuses a Secret with zero or two auths entries, without credentials, or for another host', () => {
    const refused = (flags: Parameters<typeof registryConfigFromFlags>[0]) => {
      try {
        registryConfigFromFlags(flags);
      } catch (error) {
        expect((error as { reason: string }).reason).to.equal('Misconfigured');
        return (error as Error).message;
      }
      throw new Error('accepted');
    };
    expect(refused({ dockerConfigJson: dockerConfig({}) })).to.include('exactly one auths entry, it has 0');
    expect(
      refused({ dockerConfigJson: dockerConfig({ a: { username: 'u', password: 'p' }, b: { auth: 'x' } }) }),
    ).to.include('it has 2');
    expect(refused({ dockerConfigJson: dockerConfig({ a: {} }) })).to.include('neither username');
    expect(refused({ dockerConfigJson: '{"auths": 5}' })).to.include('not a dockerconfigjson');
    expect(
      refused({
        ociRegistryHost: 'a.example',
        dockerConfigJson: dockerConfig({ 'b.example': { auth: 'dTpw' } }),
      }),
    ).to.include('for b.example');
    expect(refused({})).to.include('--oci-registry-host');
    expect(refused({ ociRegistryHost: 'ftp://x' })).to.include('scheme ftp');
    expect(refused({ ociRegistryHost: 'http://' })).to.include('no valid host');
  });

  it('reads WWW-Authenticate challenges, quoted or not, in any order', () => {
    expect(
      parseChallenge(
        'Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull"',
      ),
    ).to.deep.equal({
      scheme: 'bearer',
      params: {
        realm: 'https://auth.example/token',
        service: 'registry.example',
        scope: 'repository:a/b:pull',
      },
    });
    expect(parseChallenge('Basic realm=registry')).to.deep.equal({
      scheme: 'basic',
      params: { realm: 'registry' },
    });
    fc.assert(
      fc.property(fc.string(), (header) => {
        parseChallenge(header); // never throws, whatever a registry sends
      }),
    );
  });
});
