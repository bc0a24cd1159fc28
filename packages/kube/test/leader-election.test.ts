// LeaderElector on a real API server: one leader at a time, release hands over at once, a killed
// leader is replaced once its Lease expires, and a leader that loses its Lease steps down.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { CoordinationV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { sharedEnvironment } from '@skr-watcher/testenv';
import {
  createLeaderElector,
  type LeaderElector,
  type LeaderElectorOptions,
} from '../src/leader-election.js';
import { systemClock } from '@skr-watcher/api';
import { waitUntil } from '../../../test/support/eventually.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/elector.ts', import.meta.url));
// Short timings keep the test quick; the logic is the same as with client-go's 15 s / 10 s / 2 s.
const TIMING = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 300 };

describe('LeaderElector on a real API server', function () {
  this.timeout(120_000);
  let kubeConfig: KubeConfig;
  let kubeconfigPath: string;
  let leases: CoordinationV1Api;
  const namespace = `leader-${Date.now()}`;
  const electors: LeaderElector[] = [];
  const children: ChildProcess[] = [];

  before(async () => {
    const env = await sharedEnvironment();
    kubeConfig = env.plane('kcp').kubeConfig();
    kubeconfigPath = env.plane('kcp').kubeconfigPath;
    leases = kubeConfig.makeApiClient(CoordinationV1Api);
    await kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
  });

  afterEach(async () => {
    await Promise.all(electors.splice(0).map((e) => e.stop()));
    for (const child of children.splice(0)) child.kill('SIGKILL');
  });

  function elector(name: string, identity: string, extra: Partial<LeaderElectorOptions> = {}) {
    const events: string[] = [];
    // The system clock, counting timers: a standby sets one per retry, each at least the retry period long.
    let timers = 0;
    const e = createLeaderElector({
      kubeConfig,
      namespace,
      name,
      identity,
      ...TIMING,
      clock: {
        ...systemClock,
        setTimeout: (callback, ms) => {
          timers += 1;
          return systemClock.setTimeout(callback, ms);
        },
      },
      onStartedLeading: () => void events.push('started'),
      onStoppedLeading: (reason) => void events.push(`stopped ${reason}`),
      ...extra,
    });
    electors.push(e);
    void e.run();
    return { elector: e, events, timers: () => timers };
  }

  /** Waits until a standby has retried for `ms` of its own time (no sleeping window: its timers are counted). */
  async function retriedFor(standby: { timers: () => number }, ms: number): Promise<void> {
    const from = standby.timers();
    const retries = Math.ceil(ms / TIMING.retryPeriodMs);
    await waitUntil(`${retries} retries of the standby`, () => standby.timers() - from >= retries, 60_000);
  }

  it('creates the Lease with MicroTime timestamps, and only one of two candidates leads', async () => {
    const a = elector('single', 'replica-a');
    const b = elector('single', 'replica-b');
    await waitUntil('one leader', () => a.elector.isLeader || b.elector.isLeader);
    await retriedFor(a.elector.isLeader ? b : a, 1_000);
    expect([a.elector.isLeader, b.elector.isLeader].filter(Boolean)).to.have.length(1);
    const lease = await leases.readNamespacedLease({ name: 'single', namespace });
    const leader = a.elector.isLeader ? 'replica-a' : 'replica-b';
    expect(lease.spec?.holderIdentity).to.equal(leader);
    expect(lease.spec?.leaseDurationSeconds).to.equal(3);
    const renewTime = lease.spec?.renewTime as unknown;
    const renewText = renewTime instanceof Date ? renewTime.toISOString() : String(renewTime);
    expect(renewText).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
  });

  it('a second candidate started with the same identity does not lead while the first holds the Lease', async () => {
    const a = elector('same-identity', 'replica-x');
    await waitUntil('the first leads', () => a.elector.isLeader);
    const b = elector('same-identity', 'replica-x');
    // Marker: the first renews three more times, so the second has made several attempts meanwhile.
    const renewals = new Set<string>();
    await waitUntil('three renewals by the first', async () => {
      const lease = await leases.readNamespacedLease({ name: 'same-identity', namespace });
      renewals.add(String(lease.spec?.renewTime as unknown));
      return renewals.size >= 4;
    });
    expect(a.elector.isLeader).to.equal(true);
    expect(b.elector.isLeader).to.equal(false);
    expect(b.events).to.deep.equal([]);
  });

  it('renews: a standby stays standby for several lease durations while the leader lives', async () => {
    const a = elector('renew', 'replica-a');
    await waitUntil('a leads', () => a.elector.isLeader);
    const b = elector('renew', 'replica-b');
    await retriedFor(b, 2 * TIMING.leaseDurationMs);
    expect(a.elector.isLeader).to.equal(true);
    expect(b.elector.isLeader).to.equal(false);
    expect(b.events).to.deep.equal([]);
  });

  it('hands over at once when the leader stops and releases the Lease', async () => {
    const a = elector('release', 'replica-a');
    await waitUntil('a leads', () => a.elector.isLeader);
    const b = elector('release', 'replica-b');
    await retriedFor(b, TIMING.retryPeriodMs);
    await a.elector.stop();
    const retriesAtRelease = b.timers();
    expect(a.events).to.deep.equal(['started', 'stopped released']);
    await waitUntil('b leads', () => b.elector.isLeader);
    // Counted in b's own retries, not in wall time: a released Lease is taken at b's next attempt, while an
    // unreleased one would keep b retrying until the lease duration has passed (about ten retries here).
    expect(b.timers() - retriesAtRelease, "b's retries after the release").to.be.at.most(1);
    const lease = await leases.readNamespacedLease({ name: 'release', namespace });
    expect(lease.spec?.holderIdentity).to.equal('replica-b');
  });

  it('a standby takes over once the lease expires when the leader process is SIGKILLed', async () => {
    // node itself (not the tsx wrapper) so that SIGKILL hits the process that holds the Lease.
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '--conditions=source',
        FIXTURE,
        kubeconfigPath,
        namespace,
        'killed',
        'replica-child',
        ...Object.values(TIMING).map(String),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    children.push(child);
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    await waitUntil('the child leads', () => output.includes('leading'), 60_000);
    const b = elector('killed', 'replica-b');
    await retriedFor(b, TIMING.leaseDurationMs);
    expect(b.elector.isLeader, 'no takeover while the child renews').to.equal(false);
    const before = await leases.readNamespacedLease({ name: 'killed', namespace });
    child.kill('SIGKILL');
    const retriesBeforeKill = b.timers();
    await waitUntil('b takes over', () => b.elector.isLeader);
    // Counted in b's retries (each at least one retry period long): expiry is judged from b's last observation
    // of a renewal, at most one retry before the kill, and b takes the Lease at its first attempt after expiry.
    expect(b.timers() - retriesBeforeKill, "b's retries from the kill to its takeover").to.be.at.most(
      Math.ceil(TIMING.leaseDurationMs / TIMING.retryPeriodMs) + 2,
    );
    const after = await leases.readNamespacedLease({ name: 'killed', namespace });
    expect(after.spec?.holderIdentity).to.equal('replica-b');
    expect(after.spec?.leaseTransitions).to.equal((before.spec?.leaseTransitions ?? 0) + 1);
  });

  it('a leader whose Lease is taken over steps down (onStoppedLeading "lost")', async () => {
    const a = elector('stolen', 'replica-a');
    await waitUntil('a leads', () => a.elector.isLeader);
    const lease = await leases.readNamespacedLease({ name: 'stolen', namespace });
    // Someone else writes itself into the Lease with a long duration, as a split-brain replica would.
    await leases.replaceNamespacedLease({
      name: 'stolen',
      namespace,
      body: { ...lease, spec: { ...lease.spec, holderIdentity: 'intruder', leaseDurationSeconds: 3600 } },
    });
    await waitUntil('a steps down', () => !a.elector.isLeader);
    expect(a.events).to.deep.equal(['started', 'stopped lost']);
  });
});
