// The Kyma lanes (decision 010): one Kyma's full reconciles and targeted mirrors never run at once, and targeted
// mirrors of one object that wait coalesce into one that waits for the newest write.
import { expect } from 'chai';
import { KymaLanes, type ModuleCrChange } from '../src/reconcile/index.js';

const change = (name: string, generation: number): ModuleCrChange => ({
  gvk: { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Sample' },
  namespace: 'kyma-system',
  name,
  fingerprint: { uid: `uid-${name}`, generation, previousResourceVersion: String(generation - 1) },
});

/** A promise and the function that resolves it. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open: () => void = () => {};
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

describe('Kyma lanes', () => {
  it('runs the work of one Kyma one at a time, and other Kymas alongside', async () => {
    const lanes = new KymaLanes();
    const log: string[] = [];
    const first = gate();
    const a1 = lanes.run('ns/a', async () => {
      log.push('a1 start');
      await first.opened;
      log.push('a1 end');
    });
    const a2 = lanes.mirror('ns/a', change('sample', 2), async () => {
      log.push('a2');
      return { outcome: 'mirrored', reads: 1 };
    });
    const b = lanes.run('ns/b', async () => void log.push('b'));
    await b;
    first.open();
    await Promise.all([a1, a2]);
    expect(log).to.deep.equal(['a1 start', 'b', 'a1 end', 'a2']);
    expect(lanes.size).to.deep.equal({ lanes: 0, waitingMirrors: 0 });
  });

  it('merges waiting mirrors of one object into one that waits for the newest write', async () => {
    const lanes = new KymaLanes();
    const busy = gate();
    const running = lanes.run('ns/a', () => busy.opened);
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
      lanes.mirror('ns/a', change('other', 2), work),
    ];
    expect(lanes.size.waitingMirrors).to.equal(2);
    busy.open();
    await running;
    await Promise.all(results);
    expect(mirrored.map((m) => [m.name, m.fingerprint.generation])).to.deep.equal([
      ['sample', 5],
      ['other', 2],
    ]);
  });

  it('a mirror that is running does not absorb a later callback: that one runs after it', async () => {
    const lanes = new KymaLanes();
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
});
