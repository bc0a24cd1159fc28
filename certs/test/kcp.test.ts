// skr-certs against a real KCP API server: init-ca, issue, inspect, status and the phased, resumable rotate-ca.
import { describe, it, before } from 'mocha';
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { CoreV1Api, type V1Secret } from '@kubernetes/client-node';
import { KcpPkiSecrets } from '@skr-watcher/kube';
import { sharedEnvironment } from '@skr-watcher/testenv';
import {
  bundleCertificates,
  describeCertificate,
  isSignedBy,
  issueLeaf,
  rotationStateFromAnnotations,
  verifyLeaf,
  CA_BUNDLE_SECRET_NAME,
  CA_SECRET_NAME,
  LISTENER_TLS_SECRET_NAME,
  SECRET_KEYS,
  type CertificateAndKey,
} from '@skr-watcher/pki';
import { buildBinary, skrCerts, startSkrCerts } from './skr-certs-binary.js';

describe('skr-certs against a real KCP plane', function () {
  this.timeout(180_000);
  let kubeconfig: string;
  let api: CoreV1Api;

  before(async function () {
    buildBinary();
    const kcp = (await sharedEnvironment()).plane('kcp');
    kubeconfig = kcp.kubeconfigPath;
    api = kcp.kubeConfig().makeApiClient(CoreV1Api);
  });

  async function freshNamespace(): Promise<string> {
    const name = `certs-${randomBytes(4).toString('hex')}`;
    await api.createNamespace({ body: { metadata: { name } } });
    return name;
  }

  function data(secret: V1Secret, key: string): string {
    const value = secret.data?.[key];
    if (value === undefined) throw new Error(`${secret.metadata?.name} has no ${key}`);
    return Buffer.from(value, 'base64').toString('utf8');
  }

  const read = (namespace: string, name: string) => api.readNamespacedSecret({ namespace, name });

  async function bootstrap(namespace: string, kymas: string[]): Promise<void> {
    const init = await skrCerts([
      'init-ca',
      '--kubeconfig',
      kubeconfig,
      '-n',
      namespace,
      '--key-bits',
      '2048',
    ]);
    expect(init.code, init.stderr).to.equal(0);
    for (const kyma of kymas) {
      const issued = await skrCerts([
        'issue',
        '--kubeconfig',
        kubeconfig,
        '-n',
        namespace,
        '--kyma',
        kyma,
        '--runtime-id',
        `runtime-${kyma}`,
        '--domain',
        `${kyma}.skr.example.com`,
      ]);
      expect(issued.code, issued.stderr).to.equal(0);
    }
  }

  async function rotationPhase(namespace: string): Promise<string> {
    return rotationStateFromAnnotations((await read(namespace, CA_SECRET_NAME)).metadata?.annotations).phase;
  }

  async function leafSecrets(namespace: string): Promise<V1Secret[]> {
    const list = await api.listNamespacedSecret({ namespace });
    return list.items.filter((s) => s.metadata?.name?.endsWith('-webhook-tls'));
  }

  it('init-ca writes the CA and bundle Secrets once; issue writes <kyma>-webhook-tls with the bundle as ca.crt', async function () {
    const namespace = await freshNamespace();
    await bootstrap(namespace, ['alpha']);
    const ca = await read(namespace, CA_SECRET_NAME);
    const bundle = data(await read(namespace, CA_BUNDLE_SECRET_NAME), SECRET_KEYS.bundle);
    expect(ca.type).to.equal('kubernetes.io/tls');
    expect(bundleCertificates(bundle)).to.have.length(1);
    const leaf = await read(namespace, 'alpha-webhook-tls');
    expect(leaf.metadata?.labels).to.include({ 'operator.kyma-project.io/kyma-name': 'alpha' });
    expect(data(leaf, SECRET_KEYS.ca)).to.equal(bundle);
    const verdict = verifyLeaf(data(leaf, SECRET_KEYS.cert), bundle, {
      usages: ['serverAuth', 'clientAuth'],
    });
    expect(verdict.ok).to.equal(true);
    expect(describeCertificate(data(leaf, SECRET_KEYS.cert)).dnsNames).to.include('alpha.skr.example.com');

    const again = await skrCerts([
      'init-ca',
      '--kubeconfig',
      kubeconfig,
      '-n',
      namespace,
      '--key-bits',
      '2048',
    ]);
    expect(again.code).to.equal(1);
    expect(again.stderr).to.match(/skr-watcher-ca already exists; replace a CA with rotate-ca/);
    expect(data(await read(namespace, CA_SECRET_NAME), SECRET_KEYS.cert)).to.equal(
      data(ca, SECRET_KEYS.cert),
    );
  });

  it('issue --listener writes the listener certificate (its own names only) into skr-agent-listener-tls', async function () {
    const namespace = await freshNamespace();
    await bootstrap(namespace, []);
    const args = ['issue', '--kubeconfig', kubeconfig, '-n', namespace, '--runtime-id', 'skr-agent-listener'];
    const issued = await skrCerts([
      ...args,
      '--listener',
      '--domain',
      'Events.KCP.example.com',
      '--ip',
      '10.0.0.7',
    ]);
    expect(issued.code, issued.stderr).to.equal(0);
    expect(issued.stdout).to.contain(`secret/${namespace}/${LISTENER_TLS_SECRET_NAME}`);
    const info = describeCertificate(data(await read(namespace, LISTENER_TLS_SECRET_NAME), SECRET_KEYS.cert));
    expect(info.commonName).to.equal('skr-agent-listener');
    expect(info.dnsNames).to.deep.equal(['events.kcp.example.com']);
    expect(info.ipAddresses).to.deep.equal(['10.0.0.7']);
    const both = await skrCerts([...args, '--listener', '--kyma', 'x', '--domain', 'a.example.com']);
    expect(both.code).to.equal(2);
    expect(both.stderr).to.match(/one of --kyma or --listener/);
    const renamed = await skrCerts([
      ...args.slice(0, -1),
      'events',
      '--listener',
      '--domain',
      'events.kcp.example.com',
    ]);
    expect(renamed.code).to.equal(2);
    expect(renamed.stderr).to.match(/the listener certificate's --runtime-id must be skr-agent-listener/);
  });

  it('inspect --secret describes the certificates and reports the key without printing it', async function () {
    const namespace = await freshNamespace();
    await bootstrap(namespace, ['beta']);
    const result = await skrCerts([
      'inspect',
      '--kubeconfig',
      kubeconfig,
      '--secret',
      `${namespace}/beta-webhook-tls`,
    ]);
    expect(result.code, result.stderr).to.equal(0);
    expect(result.stdout).to.match(/beta-webhook-tls:tls\.crt\s+runtime-beta\s+skr-watcher-ca\s+leaf/);
    expect(result.stdout).to.match(/beta-webhook-tls:tls\.key\s+\(private key\).*matches certificate/);
    expect(result.stdout).to.not.match(/PRIVATE KEY-----|MII/);
    const missing = await skrCerts(['inspect', '--kubeconfig', kubeconfig, '--secret', `${namespace}/nope`]);
    expect(missing.code).to.equal(1);
    expect(missing.stderr).to.contain(`Secret ${namespace}/nope not found`);
  });

  it('status lists one row per SKR with what it needs', async function () {
    const namespace = await freshNamespace();
    await bootstrap(namespace, ['gamma', 'delta']);
    const json = await skrCerts(['status', '--kubeconfig', kubeconfig, '-n', namespace, '-o', 'json']);
    expect(json.code, json.stderr).to.equal(0);
    const report = JSON.parse(json.stdout) as {
      rotation: { phase: string };
      leaves: { kyma: string; runtimeId: string; needs: string }[];
    };
    expect(report.rotation.phase).to.equal('none');
    expect(report.leaves.map((l) => [l.kyma, l.runtimeId, l.needs])).to.deep.equal([
      ['delta', 'runtime-delta', 'none'],
      ['gamma', 'runtime-gamma', 'none'],
    ]);
    const table = await skrCerts(['status', '--kubeconfig', kubeconfig, '-n', namespace]);
    expect(table.stdout).to.match(/KYMA\s+RUNTIME-ID\s+NOT AFTER\s+ISSUER\s+NEEDS/);
    expect(table.stdout).to.match(/gamma\s+runtime-gamma\s+\S+\s+skr-watcher-ca\s+none/);
    const empty = await freshNamespace();
    const noCa = await skrCerts(['status', '--kubeconfig', kubeconfig, '-n', empty]);
    expect(noCa.code).to.equal(1);
    expect(noCa.stderr).to.match(/skr-watcher-ca not found; run init-ca first/);
  });

  it('rotates step by step: leaves of the old and the new CA both verify after every phase until the old CA is dropped', async function () {
    const namespace = await freshNamespace();
    await bootstrap(namespace, ['one', 'two', 'three']);
    const oldCa: CertificateAndKey = {
      certPem: data(await read(namespace, CA_SECRET_NAME), SECRET_KEYS.cert),
      keyPem: data(await read(namespace, CA_SECRET_NAME), SECRET_KEYS.key),
    };
    const oldLeaf = issueLeaf({ ca: oldCa, runtimeId: 'old-runtime', dnsNames: ['old.example'] });

    const caVersionBeforePlan = (await read(namespace, CA_SECRET_NAME)).metadata?.resourceVersion;
    const plan = await skrCerts([
      'rotate-ca',
      '--kubeconfig',
      kubeconfig,
      '-n',
      namespace,
      '--dry-run',
      '--key-bits',
      '2048',
    ]);
    expect(plan.code, plan.stderr).to.equal(0);
    expect(plan.stdout).to.match(/start[\s\S]*trust-new-ca[\s\S]*reissue-leaves[\s\S]*switch-signing/);
    expect(plan.stdout).to.contain('dry run, nothing written');
    expect(await rotationPhase(namespace)).to.equal('none');
    expect((await read(namespace, CA_SECRET_NAME)).metadata?.resourceVersion).to.equal(
      caVersionBeforePlan,
      'a dry run wrote the CA Secret',
    );

    const phases: string[] = [];
    for (let step = 0; step < 10; step++) {
      const result = await skrCerts([
        'rotate-ca',
        '--kubeconfig',
        kubeconfig,
        '-n',
        namespace,
        '--steps',
        '1',
        '--propagation-delay',
        '0s',
        '--grace-period',
        '0s',
        '--key-bits',
        '2048',
        '-o',
        'json',
      ]);
      expect(result.code, result.stderr).to.equal(0);
      const phase = await rotationPhase(namespace);
      if (phase === phases[phases.length - 1]) break;
      phases.push(phase);
      const caSecret = await read(namespace, CA_SECRET_NAME);
      const newCaPem =
        caSecret.data?.[SECRET_KEYS.pendingCert] !== undefined
          ? data(caSecret, SECRET_KEYS.pendingCert)
          : data(caSecret, SECRET_KEYS.cert);
      const newCaKey =
        caSecret.data?.[SECRET_KEYS.pendingKey] !== undefined
          ? data(caSecret, SECRET_KEYS.pendingKey)
          : data(caSecret, SECRET_KEYS.key);
      const bundle = data(await read(namespace, CA_BUNDLE_SECRET_NAME), SECRET_KEYS.bundle);
      if (phase === 'new-ca-pending') continue; // the new CA exists but nobody trusts it yet
      if (phase === 'new-ca-trusted' || phase === 'leaves-reissued') {
        // An SKR that joins mid-rotation gets its leaf from the CA the agent would sign with: the old one while the
        // new CA propagates (nobody may have loaded it yet), the new one once rotate-ca re-issued the leaves.
        const joined = await skrCerts([
          'issue',
          '--kubeconfig',
          kubeconfig,
          '-n',
          namespace,
          '--kyma',
          'four',
          '--runtime-id',
          'runtime-four',
          '--domain',
          'four.example',
        ]);
        expect(joined.code, joined.stderr).to.equal(0);
        const joinedLeaf = data(await read(namespace, 'four-webhook-tls'), SECRET_KEYS.cert);
        expect(
          isSignedBy(joinedLeaf, phase === 'new-ca-trusted' ? oldCa.certPem : newCaPem),
          `leaf issued in phase ${phase}`,
        ).to.equal(true);
      }
      const newLeaf = issueLeaf({
        ca: { certPem: newCaPem, keyPem: newCaKey },
        runtimeId: 'new-runtime',
        dnsNames: ['new.example'],
      });
      expect(verifyLeaf(newLeaf.certPem, bundle).ok, `new-CA leaf in phase ${phase}`).to.equal(true);
      expect(verifyLeaf(oldLeaf.certPem, bundle).ok, `old-CA leaf in phase ${phase}`).to.equal(
        phase !== 'complete',
      );
      for (const leaf of await leafSecrets(namespace)) {
        expect(
          verifyLeaf(data(leaf, SECRET_KEYS.cert), bundle).ok,
          `${leaf.metadata?.name} in phase ${phase}`,
        ).to.equal(true);
      }
    }
    expect(phases).to.deep.equal([
      'new-ca-pending',
      'new-ca-trusted',
      'leaves-reissued',
      'signing-switched',
      'complete',
    ]);

    const caSecret = await read(namespace, CA_SECRET_NAME);
    expect(Object.keys(caSecret.data ?? {}).sort()).to.deep.equal(['tls.crt', 'tls.key']);
    const newCa = data(caSecret, SECRET_KEYS.cert);
    const bundle = data(await read(namespace, CA_BUNDLE_SECRET_NAME), SECRET_KEYS.bundle);
    expect(bundleCertificates(bundle)).to.deep.equal([newCa]);
    const leaves = await leafSecrets(namespace);
    expect(leaves).to.have.length(4);
    for (const leaf of leaves) {
      expect(isSignedBy(data(leaf, SECRET_KEYS.cert), newCa)).to.equal(true);
      expect(data(leaf, SECRET_KEYS.ca)).to.equal(bundle);
    }
    const status = JSON.parse(
      (await skrCerts(['status', '--kubeconfig', kubeconfig, '-n', namespace, '-o', 'json'])).stdout,
    ) as { leaves: { needs: string }[] };
    expect(status.leaves.map((l) => l.needs)).to.deep.equal(['none', 'none', 'none', 'none']);

    const idle = await skrCerts(['rotate-ca', '--kubeconfig', kubeconfig, '-n', namespace]);
    expect(idle.code).to.equal(0);
    expect(idle.stdout).to.contain('nothing to do');
    expect(data(await read(namespace, CA_SECRET_NAME), SECRET_KEYS.cert)).to.equal(newCa);
  });

  it('stops in the grace period, keeps both CAs trusted, and finishes when run again after it', async function () {
    const namespace = await freshNamespace();
    await bootstrap(namespace, ['eps']);
    const oldCa: CertificateAndKey = {
      certPem: data(await read(namespace, CA_SECRET_NAME), SECRET_KEYS.cert),
      keyPem: data(await read(namespace, CA_SECRET_NAME), SECRET_KEYS.key),
    };
    const first = await skrCerts([
      'rotate-ca',
      '--kubeconfig',
      kubeconfig,
      '-n',
      namespace,
      '--propagation-delay',
      '0s',
      '--grace-period',
      '1h',
      '--key-bits',
      '2048',
    ]);
    expect(first.code, first.stderr).to.equal(0);
    expect(first.stdout).to.match(/phase: signing-switched/);
    expect(first.stdout).to.match(/grace period until: /);
    expect(await rotationPhase(namespace)).to.equal('signing-switched');
    expect(
      bundleCertificates(data(await read(namespace, CA_BUNDLE_SECRET_NAME), SECRET_KEYS.bundle)),
    ).to.have.length(2);

    // A leaf the agent issued with the old CA between re-issue and switch is a straggler: it moves before the old CA goes.
    const caSecret = await read(namespace, CA_SECRET_NAME);
    expect(data(caSecret, SECRET_KEYS.previousCert)).to.equal(oldCa.certPem);
    const straggler = issueLeaf({ ca: oldCa, runtimeId: 'runtime-late', dnsNames: ['late.example'] });
    await api.createNamespacedSecret({
      namespace,
      body: {
        metadata: { name: 'late-webhook-tls' },
        type: 'kubernetes.io/tls',
        data: {
          [SECRET_KEYS.cert]: Buffer.from(straggler.certPem).toString('base64'),
          [SECRET_KEYS.key]: Buffer.from(straggler.keyPem).toString('base64'),
          [SECRET_KEYS.ca]: Buffer.from(oldCa.certPem).toString('base64'),
        },
      },
    });

    const finish = await skrCerts([
      'rotate-ca',
      '--kubeconfig',
      kubeconfig,
      '-n',
      namespace,
      '--propagation-delay',
      '0s',
      '--grace-period',
      '0s',
      '-o',
      'json',
    ]);
    expect(finish.code, finish.stderr).to.equal(0);
    const report = JSON.parse(finish.stdout) as { steps: { step: string; detail: string }[] };
    expect(report.steps.map((s) => s.step)).to.deep.equal(['reissue-leaves', 'drop-old-ca']);
    expect(report.steps[0]?.detail).to.equal('1 of 2 leaves re-issued');
    const late = await read(namespace, 'late-webhook-tls');
    const newCa = data(await read(namespace, CA_SECRET_NAME), SECRET_KEYS.cert);
    expect(isSignedBy(data(late, SECRET_KEYS.cert), newCa)).to.equal(true);
    expect(describeCertificate(data(late, SECRET_KEYS.cert)).commonName).to.equal('runtime-late');
    expect(await rotationPhase(namespace)).to.equal('complete');
    expect(
      bundleCertificates(data(await read(namespace, CA_BUNDLE_SECRET_NAME), SECRET_KEYS.bundle)),
    ).to.have.length(1);
  });

  it('with --wait sleeps through the propagation delay and the grace period and completes in one run', async function () {
    const namespace = await freshNamespace();
    await bootstrap(namespace, ['wait']);
    const started = Date.now();
    const result = await skrCerts([
      'rotate-ca',
      '--kubeconfig',
      kubeconfig,
      '-n',
      namespace,
      '--propagation-delay',
      '2s',
      '--grace-period',
      '2s',
      '--wait',
      '--key-bits',
      '2048',
    ]);
    expect(result.code, result.stderr).to.equal(0);
    expect(result.stderr).to.match(
      /waiting while the new CA propagates, until .*\n[\s\S]*re-issued wait-webhook-tls/,
    );
    expect(result.stderr).to.match(/waiting while the grace period runs, until/);
    expect(await rotationPhase(namespace)).to.equal('complete');
    expect(Date.now() - started).to.be.at.least(4000);
  });

  it('stops while the new CA propagates, signing nothing with it, and continues when run again after the delay', async function () {
    const namespace = await freshNamespace();
    await bootstrap(namespace, ['prop']);
    const oldCa = data(await read(namespace, CA_SECRET_NAME), SECRET_KEYS.cert);
    const rotate = (extra: string[]) =>
      skrCerts([
        'rotate-ca',
        '--kubeconfig',
        kubeconfig,
        '-n',
        namespace,
        // Long enough that the second run below starts (a CLI process, seconds on a loaded machine) within it.
        '--propagation-delay',
        '20s',
        '--grace-period',
        '0s',
        '--key-bits',
        '2048',
        ...extra,
      ]);
    const first = await rotate(['-o', 'json']);
    expect(first.code, first.stderr).to.equal(0);
    const report = JSON.parse(first.stdout) as {
      steps: { step: string }[];
      waitingUntil: string;
      waitingFor: string;
    };
    expect(report.steps.map((s) => s.step)).to.deep.equal(['start', 'trust-new-ca']);
    expect(report.waitingFor).to.equal('propagation');
    expect(first.stderr).to.match(/the new CA propagates until .*; run rotate-ca again after that/);
    expect(await rotationPhase(namespace)).to.equal('new-ca-trusted');
    // The new CA is trusted everywhere (bundle and every leaf's ca.crt) but signs nothing yet.
    const bundle = data(await read(namespace, CA_BUNDLE_SECRET_NAME), SECRET_KEYS.bundle);
    expect(bundleCertificates(bundle)).to.have.length(2);
    const leaf = await read(namespace, 'prop-webhook-tls');
    expect(data(leaf, SECRET_KEYS.ca)).to.equal(bundle);
    expect(isSignedBy(data(leaf, SECRET_KEYS.cert), oldCa)).to.equal(true);

    const early = await rotate([]);
    expect(early.code, early.stderr).to.equal(0);
    expect(early.stdout).to.match(
      /nothing to do yet[\s\S]*phase: new-ca-trusted[\s\S]*propagation delay until: /,
    );
    expect(isSignedBy(data(await read(namespace, 'prop-webhook-tls'), SECRET_KEYS.cert), oldCa)).to.equal(
      true,
    );

    await new Promise((resolve) => setTimeout(resolve, Date.parse(report.waitingUntil) - Date.now() + 100));
    const after = await rotate(['-o', 'json']);
    expect(after.code, after.stderr).to.equal(0);
    const finished = JSON.parse(after.stdout) as { steps: { step: string }[]; state: { phase: string } };
    expect(finished.steps.map((s) => s.step)).to.deep.equal([
      'reissue-leaves',
      'switch-signing',
      'drop-old-ca',
    ]);
    expect(finished.state.phase).to.equal('complete');
    const newCa = data(await read(namespace, CA_SECRET_NAME), SECRET_KEYS.cert);
    expect(newCa).to.not.equal(oldCa);
    expect(isSignedBy(data(await read(namespace, 'prop-webhook-tls'), SECRET_KEYS.cert), newCa)).to.equal(
      true,
    );
  });

  it('re-issues the KCP listener certificate only once the new CA signs, and before the old CA is dropped', async function () {
    const namespace = await freshNamespace();
    await bootstrap(namespace, ['lst']);
    const secrets = new KcpPkiSecrets(api, namespace);
    const oldCa = await secrets.readCa();
    const bundle = (await secrets.readBundle()) ?? '';
    const listener = issueLeaf({
      ca: oldCa!.current,
      role: 'listener',
      dnsNames: ['listener.kcp.example.com'],
      ipAddresses: ['127.0.0.1'],
      keyBits: 2048,
    });
    await secrets.writeListenerLeaf(listener, bundle);
    const listenerCert = async () => data(await read(namespace, LISTENER_TLS_SECRET_NAME), SECRET_KEYS.cert);
    const step = async () => {
      const result = await skrCerts([
        'rotate-ca',
        '--kubeconfig',
        kubeconfig,
        '-n',
        namespace,
        '--steps',
        '1',
        '--propagation-delay',
        '0s',
        '--grace-period',
        '0s',
        '--key-bits',
        '2048',
      ]);
      expect(result.code, result.stderr).to.equal(0);
      return rotationPhase(namespace);
    };
    // start, trust, re-issue: SKR leaves move to the new CA, the listener stays on the old one.
    expect(await step()).to.equal('new-ca-pending');
    expect(await step()).to.equal('new-ca-trusted');
    expect(await step()).to.equal('leaves-reissued');
    expect(isSignedBy(await listenerCert(), oldCa!.current.certPem)).to.equal(true);
    const skrLeaf = data(await read(namespace, 'lst-webhook-tls'), SECRET_KEYS.cert);
    expect(isSignedBy(skrLeaf, oldCa!.current.certPem)).to.equal(false);
    // switch: the listener is now a straggler and is re-issued (names kept) before the old CA can go.
    expect(await step()).to.equal('signing-switched');
    expect(await step()).to.equal('signing-switched');
    const reissued = describeCertificate(await listenerCert());
    expect(isSignedBy(await listenerCert(), oldCa!.current.certPem)).to.equal(false);
    expect(reissued.commonName).to.equal('skr-agent-listener');
    expect(reissued.dnsNames).to.deep.equal(['listener.kcp.example.com']);
    expect(reissued.ipAddresses).to.deep.equal(['127.0.0.1']);
    expect(await step()).to.equal('complete');
  });

  it('re-issue and ca.crt writes of a leaf Secret survive a concurrent write by the agent (409 is retried on a fresh read)', async function () {
    const namespace = await freshNamespace();
    await bootstrap(namespace, ['race']);
    const secrets = new KcpPkiSecrets(api, namespace);
    const ca = (await secrets.readCa())!;
    const [stale] = await secrets.listLeaves();
    // The agent writes the Secret after rotate-ca read it: rotate-ca's resourceVersion is outdated.
    const agentLeaf = issueLeaf({ ca: ca.current, runtimeId: 'runtime-race', dnsNames: ['agent.example'] });
    await secrets.writeLeaf('race', agentLeaf, 'agent bundle');
    const rotated = issueLeaf({ ca: ca.current, runtimeId: 'runtime-race', dnsNames: ['rotated.example'] });
    await secrets.rewriteLeaf(stale!, rotated, 'rotation bundle');
    let secret = await read(namespace, 'race-webhook-tls');
    expect(data(secret, SECRET_KEYS.cert)).to.equal(rotated.certPem);
    expect(data(secret, SECRET_KEYS.ca)).to.equal('rotation bundle');
    expect(secret.metadata?.labels).to.include({ 'operator.kyma-project.io/kyma-name': 'race' });

    await secrets.writeLeaf('race', agentLeaf, 'agent bundle');
    await secrets.writeLeafBundle(stale!, 'dropped bundle');
    secret = await read(namespace, 'race-webhook-tls');
    expect(data(secret, SECRET_KEYS.ca)).to.equal('dropped bundle');
    expect(data(secret, SECRET_KEYS.cert)).to.equal(agentLeaf.certPem, "the agent's leaf was kept");
  });

  it('a rotate-ca killed in the middle resumes where it stopped and completes when run again', async function () {
    const namespace = await freshNamespace();
    const kymas = Array.from({ length: 8 }, (_, i) => `k${i}`);
    await bootstrap(namespace, kymas);
    const originalCa = data(await read(namespace, CA_SECRET_NAME), SECRET_KEYS.cert);

    const child = startSkrCerts([
      'rotate-ca',
      '--kubeconfig',
      kubeconfig,
      '-n',
      namespace,
      '--propagation-delay',
      '0s',
      '--grace-period',
      '0s',
      '--key-bits',
      '2048',
    ]);
    let stderr = '';
    const killed = new Promise<void>((resolve) => {
      child.stderr?.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
        if (/re-issued k\d-webhook-tls/.test(stderr) && !child.killed) {
          child.kill('SIGKILL');
          resolve();
        }
      });
      child.on('close', () => resolve());
    });
    await killed;
    await new Promise((resolve) =>
      child.exitCode !== null || child.signalCode !== null ? resolve(null) : child.on('close', resolve),
    );
    expect(child.signalCode, `rotate-ca finished before it could be killed:\n${stderr}`).to.equal('SIGKILL');
    const phaseAfterKill = await rotationPhase(namespace);
    expect(phaseAfterKill).to.equal('new-ca-trusted');
    const movedBeforeKill = (await leafSecrets(namespace)).filter(
      (s) => !isSignedBy(data(s, SECRET_KEYS.cert), originalCa),
    );
    expect(movedBeforeKill.length).to.be.within(1, 7);
    // Every SKR keeps working meanwhile: its leaf verifies against the bundle the listener trusts.
    const midBundle = data(await read(namespace, CA_BUNDLE_SECRET_NAME), SECRET_KEYS.bundle);
    for (const leaf of await leafSecrets(namespace))
      expect(verifyLeaf(data(leaf, SECRET_KEYS.cert), midBundle).ok).to.equal(true);

    const resumed = await skrCerts([
      'rotate-ca',
      '--kubeconfig',
      kubeconfig,
      '-n',
      namespace,
      '--propagation-delay',
      '0s',
      '--grace-period',
      '0s',
      '-o',
      'json',
    ]);
    expect(resumed.code, resumed.stderr).to.equal(0);
    const report = JSON.parse(resumed.stdout) as {
      steps: { step: string; detail: string }[];
      state: { phase: string };
    };
    expect(report.steps.map((s) => s.step)).to.deep.equal([
      'reissue-leaves',
      'switch-signing',
      'drop-old-ca',
    ]);
    expect(report.steps[0]?.detail).to.equal(`${8 - movedBeforeKill.length} of 8 leaves re-issued`);
    expect(report.state.phase).to.equal('complete');

    const newCa = data(await read(namespace, CA_SECRET_NAME), SECRET_KEYS.cert);
    expect(newCa).to.not.equal(originalCa);
    for (const leaf of await leafSecrets(namespace))
      expect(isSignedBy(data(leaf, SECRET_KEYS.cert), newCa)).to.equal(true);
  });

  it('resumes a rotation that crashed after storing the new CA but before trusting it', async function () {
    const namespace = await freshNamespace();
    await bootstrap(namespace, ['zeta']);
    const one = await skrCerts([
      'rotate-ca',
      '--kubeconfig',
      kubeconfig,
      '-n',
      namespace,
      '--steps',
      '1',
      '--key-bits',
      '2048',
    ]);
    expect(one.code, one.stderr).to.equal(0);
    expect(await rotationPhase(namespace)).to.equal('new-ca-pending');
    const pending = data(await read(namespace, CA_SECRET_NAME), SECRET_KEYS.pendingCert);
    const resumed = await skrCerts([
      'rotate-ca',
      '--kubeconfig',
      kubeconfig,
      '-n',
      namespace,
      '--propagation-delay',
      '0s',
      '--grace-period',
      '0s',
    ]);
    expect(resumed.code, resumed.stderr).to.equal(0);
    expect(data(await read(namespace, CA_SECRET_NAME), SECRET_KEYS.cert)).to.equal(pending);
    expect(await rotationPhase(namespace)).to.equal('complete');
  });

  it('fails with exit 1 and the API server reason when the kubeconfig points nowhere or the namespace is missing', async function () {
    const gone = await skrCerts(['status', '--kubeconfig', '/nonexistent/kubeconfig']);
    expect(gone.code).to.equal(1);
    expect(gone.stderr).to.match(/read kubeconfig \/nonexistent\/kubeconfig/);
    const noNamespace = await skrCerts([
      'init-ca',
      '--kubeconfig',
      kubeconfig,
      '-n',
      'does-not-exist-ns',
      '--key-bits',
      '2048',
    ]);
    expect(noNamespace.code).to.equal(1);
    expect(noNamespace.stderr).to.match(/create Secret does-not-exist-ns\/skr-watcher-ca[\s\S]*HTTP 404/);
  });
});
