// The ring that carries relevant changes to the dispatch thread without a shared lock (decision 022).
import { expect } from 'chai';
import { ChangeRing } from '../src/dispatch/change-ring.js';

const bytes = (text: string) => new TextEncoder().encode(text);
const texts = (records: Uint8Array[]) => records.map((record) => new TextDecoder().decode(record));

describe('change ring', () => {
  it('hands records over in order, across the end of the buffer, many times round', () => {
    const producer = new ChangeRing(64);
    const consumer = new ChangeRing(producer.buffer);
    const seen: string[] = [];
    const sent: string[] = [];
    for (let i = 0; i < 500; i++) {
      const text = `change-${i}-${'x'.repeat(i % 17)}`;
      expect(producer.write(bytes(text)), `record ${i} fits an emptied ring`).to.equal(true);
      sent.push(text);
      if (i % 2 === 1) seen.push(...texts(consumer.readAll()));
    }
    seen.push(...texts(consumer.readAll()));
    expect(seen).to.deep.equal(sent);
    expect(consumer.used).to.equal(0);
  });

  it('refuses a record that does not fit and takes it once the reader made room', () => {
    const producer = new ChangeRing(64);
    const consumer = new ChangeRing(producer.buffer);
    expect(producer.write(bytes('a'.repeat(40)))).to.equal(true);
    expect(producer.write(bytes('b'.repeat(20))), '4 + 40 + 4 + 20 > 64').to.equal(false);
    expect(texts(consumer.readAll())).to.deep.equal(['a'.repeat(40)]);
    expect(producer.write(bytes('b'.repeat(20)))).to.equal(true);
    expect(texts(consumer.readAll())).to.deep.equal(['b'.repeat(20)]);
  });

  it('lets a reader sleep only on an empty ring, and exactly one writer wake it', () => {
    const producer = new ChangeRing(64);
    const consumer = new ChangeRing(producer.buffer);
    expect(producer.wake(), 'a polling reader needs no wake-up').to.equal(false);
    expect(consumer.sleep()).to.equal(true);
    producer.write(bytes('first'));
    expect(producer.wake(), 'the first writer after it slept wakes it').to.equal(true);
    expect(producer.wake(), 'only once').to.equal(false);
    producer.write(bytes('second'));
    expect(consumer.sleep(), 'records arrived: it keeps reading').to.equal(false);
    expect(producer.wake(), 'and it is awake').to.equal(false);
    expect(texts(consumer.readAll())).to.deep.equal(['first', 'second']);
  });

  it('refuses a capacity that is not a power of two', () => {
    expect(() => new ChangeRing(100)).to.throw(/power of two/);
  });
});
