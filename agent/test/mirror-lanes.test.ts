// The mirror lanes (decision 010): the writes of one Module CR's ModuleConfig run one at a time, a targeted mirror
// never waits for anything but them, and targeted mirrors of one object that wait coalesce into one that waits for
// the newest write.
import { expect } from 'chai';
import { MirrorLanes, mirrorLaneKey, type ModuleCrChange } from '../src/reconcile/index.js';

const GROUP = 'operator.kyma-project.io';
const change = (name: string, generation: number): ModuleCrChange => ({
  gvk: { group: GROUP, version: 'v1alpha1', kind: 'Sample' },
  namespace: 'kyma-system',
  name,
  fingerprint: { uid: `uid-${name}`, generation, previousResourceVersion: String(generation - 1) },
});
/** The lane the full reconcile of `ns/a` uses for its mirror step of Module CR `name`. */
const laneOf = (name: string) =>
  mirrorLaneKey('ns/a', { group: GROUP, kind: 'Sample', namespace: 'kyma-system', name });

/** A promise and the function that resolves it. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open: () => void = () => {};
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

describe('mirror lanes', () => {
  it('runs a targeted mirror after the mirror step of the same object, and alongside any other work', async () => {
    const lanes = new MirrorLanes();
    const log: string[] = [];
    const fullPass = gate();
    const mirrorStep = gate();
    // A full reconcile of the Kyma (its own lane) and its mirror step of `sample`.
    const pass = lanes.run('ns/a', async () => {
      log.push('pass start');
      await fullPass.opened;
      log.push('pass end');
    });
    const step = lanes.run(laneOf('sample'), async () => {
      log.push('step start');
      await mirrorStep.opened;
      log.push('step end');
    });
    const sample = lanes.mirror('ns/a', change('sample', 2), async () => {
      log.push('mirror sample');
      return { outcome: 'mirrored', reads: 1 };
    });
    await lanes.mirror('ns/a', change('other', 2), async () => {
      log.push('mirror other');
      return { outcome: 'mirrored', reads: 1 };
    });
    mirrorStep.open();
    await sample;
    fullPass.open();
    await Promise.all([pass, step]);
    expect(log).to.deep.equal([
      'pass start',
      'step start',
      'mirror other',
      'step end',
      'mirror sample',
      'pass end',
    ]);
    expect(lanes.size).to.deep.equal({ lanes: 0, waitingMirrors: 0 });
  });

  it('tells a running mirror whether a newer mirror of its object waits behind it (it then leaves the status write to that one)', async () => {
    const lanes = new MirrorLanes();
    const busy = gate();
    const seen: boolean[] = [];
    const first = lanes.mirror('ns/a', change('sample', 2), async (_change, superseded) => {
      seen.push(superseded());
      await busy.opened;
      seen.push(superseded());
      return { outcome: 'mirrored', reads: 1 };
    });
    // Another object's mirror is not a newer one of this object.
    await lanes.mirror('ns/a', change('other', 2), async () => ({ outcome: 'mirrored', reads: 1 }));
    const second = lanes.mirror('ns/a', change('sample', 3), async (_change, superseded) => {
      seen.push(superseded());
      return { outcome: 'mirrored', reads: 1 };
    });
    busy.open();
    await Promise.all([first, second]);
    expect(seen).to.deep.equal([false, true, false]);
  });

  it('merges waiting mirrors of one object into one that waits for the newest write', async () => {
    const lanes = new MirrorLanes();
    const busy = gate();
    const running = lanes.run(laneOf('sample'), () => busy.opened);
    const mirrored: ModuleCrChange[] = [];
    const work = async (merged: ModuleCrChange) => {
      mirrored.push(merged);
      return { outcome: 'mirrored' as const, reads: 1 };
    };
    const results = [
      lanes.mirror('ns/a', change('sample', 3), work),
      lanes.mirror('ns/a', change('sample', 5), work),
      // Arrived late (out of order): the newer write already waits.
      lanes.mirror('ns/a', change('sample', 4), work),
    ];
    expect(lanes.size.waitingMirrors).to.equal(1);
    busy.open();
    await running;
    await Promise.all(results);
    expect(mirrored.map((m) => [m.name, m.fingerprint.generation])).to.deep.equal([['sample', 5]]);
  });

  it('a mirror that is running does not absorb a later callback: that one runs after it', async () => {
    const lanes = new MirrorLanes();
    const inside = gate();
    const release = gate();
    const generations: (number | undefined)[] = [];
    const first = lanes.mirror('ns/a', change('sample', 2), async (merged) => {
      generations.push(merged.fingerprint.generation);
      inside.open();
      await release.opened;
      return { outcome: 'mirrored', reads: 1 };
    });
    await inside.opened;
    const second = lanes.mirror('ns/a', change('sample', 3), async (merged) => {
      generations.push(merged.fingerprint.generation);
      return { outcome: 'mirrored', reads: 1 };
    });
    release.open();
    await Promise.all([first, second]);
    expect(generations).to.deep.equal([2, 3]);
  });

  it('drains the mirrors of one Kyma queued so far, not its full reconcile nor other Kymas', async () => {
    const lanes = new MirrorLanes();
    const release = gate();
    const log: string[] = [];
    void lanes.run('ns/a', () => release.opened);
    void lanes.mirror('ns/b', change('sample', 2), async () => {
      await release.opened;
      return { outcome: 'mirrored', reads: 1 };
    });
    const mirror = lanes.mirror('ns/a', change('sample', 2), async () => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      log.push('mirror');
      return { outcome: 'mirrored', reads: 1 };
    });
    await lanes.drain('ns/a');
    log.push('drained');
    await mirror;
    release.open();
    expect(log).to.deep.equal(['mirror', 'drained']);
  });
});
