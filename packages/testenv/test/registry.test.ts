// The test registry: a real go-containerregistry registry with the Docker token flow, TLS and a disk store whose
// damage reaches the client.
import { createHash } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { get } from 'node:https';
import { expect } from 'chai';
import { liveChildPids } from '../src/processes.js';
import { startRegistry, type Registry } from '../src/registry.js';

const sha256 = (data: Buffer | string) => `sha256:${createHash('sha256').update(data).digest('hex')}`;

/** The WWW-Authenticate parameters of a Bearer challenge. */
function challenge(header: string | null): Record<string, string> {
  expect(header, 'WWW-Authenticate').to.match(/^Bearer /);
  return Object.fromEntries([...header!.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]));
}

async function pushBlob(
  registry: Registry,
  repository: string,
  data: Buffer,
  token?: string,
): Promise<string> {
  const digest = sha256(data);
  const headers: Record<string, string> = { 'content-type': 'application/octet-stream' };
  if (token) headers['authorization'] = `Bearer ${token}`;
  const response = await fetch(`${registry.url}/v2/${repository}/blobs/uploads/?digest=${digest}`, {
    method: 'POST',
    headers,
    body: data,
  });
  expect(response.status, await response.text()).to.equal(201);
  return digest;
}

describe('testenv registry', function () {
  this.timeout(600_000); // a cold cache builds the registry first (1–3 min)

  describe('anonymous, plain HTTP', () => {
    let registry: Registry;
    before(async () => {
      registry = await startRegistry();
    });
    after(async () => {
      await registry?.stop();
    });

    it('stores a blob under its digest and refuses an upload whose bytes do not match', async () => {
      const digest = await pushBlob(registry, 'a/b', Buffer.from('hello'));
      const response = await fetch(`${registry.url}/v2/a/b/blobs/${digest}`);
      expect(await response.text()).to.equal('hello');
      const wrong = await fetch(`${registry.url}/v2/a/b/blobs/uploads/?digest=${sha256('other')}`, {
        method: 'POST',
        body: 'hello',
      });
      expect(wrong.status).to.equal(400);
    });

    it('serves a damaged stored blob as it is, so the client must verify the digest', async () => {
      const digest = await pushBlob(registry, 'a/b', Buffer.from('original bytes'));
      await writeFile(registry.blobPath(digest), 'damaged bytes!');
      const response = await fetch(`${registry.url}/v2/a/b/blobs/${digest}`);
      expect(response.status).to.equal(200);
      expect(response.headers.get('docker-content-digest')).to.equal(digest);
      expect(await response.text()).to.equal('damaged bytes!');
    });

    it('stops its process', async () => {
      const other = await startRegistry();
      expect(liveChildPids()).to.include(other.process.pid);
      await other.stop();
      expect(liveChildPids()).not.to.include(other.process.pid);
      expect(await fetch(`${other.url}/v2/`).catch((e: Error) => e)).to.be.instanceOf(Error);
    });
  });

  describe('Bearer token flow over TLS', () => {
    let registry: Registry;
    const auth = { username: 'puller', password: 's3cret' };
    before(async () => {
      registry = await startRegistry({ auth, tls: true });
    });
    after(async () => {
      await registry?.stop();
    });

    it('answers over HTTPS with a certificate from its CA', async () => {
      const status = await new Promise<number>((resolve, reject) => {
        get(`${registry.url}/v2/`, { ca: registry.ca }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        }).on('error', reject);
      });
      expect(status).to.equal(401);
    });
  });

  describe('Bearer token flow', () => {
    let registry: Registry;
    const auth = { username: 'puller', password: 's3cret' };
    before(async () => {
      registry = await startRegistry({ auth });
    });
    after(async () => {
      await registry?.stop();
    });

    async function token(scope: string, credentials = auth): Promise<Response> {
      const found = challenge(
        (await fetch(`${registry.url}/v2/${scope.split(':')[1]}/manifests/x`)).headers.get(
          'www-authenticate',
        ),
      );
      const basic = Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64');
      return fetch(`${found['realm']}?service=${found['service']}&scope=${scope}`, {
        headers: { authorization: `Basic ${basic}` },
      });
    }

    it('challenges with realm, service and the scope the request needs', async () => {
      const ping = await fetch(`${registry.url}/v2/`);
      expect(ping.status).to.equal(401);
      expect(challenge(ping.headers.get('www-authenticate'))).to.deep.equal({
        realm: `${registry.url}/token`,
        service: 'skr-testenv-registry',
      });
      const pull = await fetch(`${registry.url}/v2/component-descriptors/x.io/m/manifests/1.0.0`);
      expect(pull.status).to.equal(401);
      expect(challenge(pull.headers.get('www-authenticate'))['scope']).to.equal(
        'repository:component-descriptors/x.io/m:pull',
      );
      const push = await fetch(`${registry.url}/v2/a/b/blobs/uploads/`, { method: 'POST' });
      expect(challenge(push.headers.get('www-authenticate'))['scope']).to.equal('repository:a/b:push');
    });

    it('issues a token for the right credentials only, good for the scope granted', async () => {
      expect((await token('repository:a/b:pull', { username: 'puller', password: 'wrong' })).status).to.equal(
        401,
      );
      const granted = await token('repository:a/b:pull,push');
      expect(granted.status).to.equal(200);
      const { token: bearer } = (await granted.json()) as { token: string };
      const digest = await pushBlob(registry, 'a/b', Buffer.from('private'), bearer);
      const read = await fetch(`${registry.url}/v2/a/b/blobs/${digest}`, {
        headers: { authorization: `Bearer ${bearer}` },
      });
      expect(await read.text()).to.equal('private');
      const elsewhere = await fetch(`${registry.url}/v2/a/c/blobs/${digest}`, {
        headers: { authorization: `Bearer ${bearer}` },
      });
      expect(elsewhere.status).to.equal(401);
      const unknown = await fetch(`${registry.url}/v2/a/b/blobs/${digest}`, {
        headers: { authorization: 'Bearer made-up' },
      });
      expect(unknown.status).to.equal(401);
    });

    it('writes a dockerconfigjson with one auths entry for its host', () => {
      const config = JSON.parse(registry.dockerConfigJson()) as { auths: Record<string, { auth: string }> };
      expect(Object.keys(config.auths)).to.deep.equal([registry.host]);
      expect(Buffer.from(config.auths[registry.host]!.auth, 'base64').toString()).to.equal('puller:s3cret');
    });
  });
});
