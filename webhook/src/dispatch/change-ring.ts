// How relevant changes reach the dispatch thread without a lock the two threads share (decision 022):
// one producer (the admission thread) and one consumer (the dispatch thread) over a byte ring in shared memory.
//
// A MessagePort holds a mutex while it queues a message and wakes the receiver inside it. The dispatch thread is
// SCHED_IDLE (decision 015): when a normal thread wakes on its core it gives the core up at once, also inside that
// mutex, and then waits for a core behind every normal thread of the machine; an admission thread that posts or
// receives meanwhile sleeps on the mutex for as long. Here the admission thread only copies bytes and moves an
// index with an atomic store; the dispatch thread takes what is there on its own timer.

/** Bytes of the ring: about 4,000 changes of ~250 bytes, seconds of backlog at 1,000 reviews/s. A power of two. */
export const CHANGE_RING_BYTES = 1 << 20;
/** Header words: bytes written (wrapping u32), bytes read (wrapping u32), consumer asleep (1) or polling (0). */
const WRITTEN = 0;
const READ = 1;
const ASLEEP = 2;
const HEADER_BYTES = 16;
const LENGTH_BYTES = 4;

export class ChangeRing {
  readonly buffer: SharedArrayBuffer;
  private readonly header: Uint32Array;
  private readonly data: Uint8Array;
  private readonly mask: number;

  /** A new ring of `capacity` bytes (a power of two), or the view of one made elsewhere. */
  constructor(from: SharedArrayBuffer | number = CHANGE_RING_BYTES) {
    const buffer =
      typeof from === 'number'
        ? new SharedArrayBuffer(HEADER_BYTES + ChangeRing.checkedCapacity(from))
        : from;
    const capacity = ChangeRing.checkedCapacity(buffer.byteLength - HEADER_BYTES);
    this.buffer = buffer;
    this.header = new Uint32Array(buffer, 0, HEADER_BYTES / 4);
    this.data = new Uint8Array(buffer, HEADER_BYTES, capacity);
    this.mask = capacity - 1;
  }

  private static checkedCapacity(bytes: number): number {
    if (!(bytes >= 64 && (bytes & (bytes - 1)) === 0 && bytes <= 2 ** 30))
      throw new Error(`change ring capacity must be a power of two between 64 bytes and 1 GiB, got ${bytes}`);
    return bytes;
  }

  /** Bytes waiting to be read. */
  get used(): number {
    return (Atomics.load(this.header, WRITTEN) - Atomics.load(this.header, READ)) >>> 0;
  }

  /** Producer: appends one record; false (nothing written) if it does not fit now. */
  write(record: Uint8Array): boolean {
    const need = LENGTH_BYTES + record.length;
    if (need > this.data.length - this.used) return false;
    const at = Atomics.load(this.header, WRITTEN);
    const length = record.length;
    this.copyIn(
      at,
      Uint8Array.of(length & 0xff, (length >>> 8) & 0xff, (length >>> 16) & 0xff, length >>> 24),
    );
    this.copyIn((at + LENGTH_BYTES) >>> 0, record);
    // The store publishes the bytes above: the consumer reads no further than this index.
    Atomics.store(this.header, WRITTEN, (at + need) >>> 0);
    return true;
  }

  /** Consumer: every record written so far, oldest first. */
  readAll(): Uint8Array[] {
    const records: Uint8Array[] = [];
    const end = Atomics.load(this.header, WRITTEN);
    let at = Atomics.load(this.header, READ);
    while (at !== end) {
      const size = this.copyOut(at, LENGTH_BYTES);
      const length =
        ((size[0] as number) | ((size[1] as number) << 8) | ((size[2] as number) << 16)) +
        (size[3] as number) * 2 ** 24;
      records.push(this.copyOut((at + LENGTH_BYTES) >>> 0, length));
      at = (at + LENGTH_BYTES + length) >>> 0;
    }
    Atomics.store(this.header, READ, at);
    return records;
  }

  /**
   * Consumer: stops polling. Returns false if records arrived meanwhile (it must read them and keep polling): a
   * record written before the flag was set is seen here, one written after it finds the flag and wakes it.
   */
  sleep(): boolean {
    Atomics.store(this.header, ASLEEP, 1);
    if (this.used === 0) return true;
    this.wake();
    return false;
  }

  /** True for the one caller that turned a sleeping consumer awake (producer: then post it a wake-up). */
  wake(): boolean {
    return Atomics.compareExchange(this.header, ASLEEP, 1, 0) === 1;
  }

  private copyIn(at: number, bytes: Uint8Array): void {
    const offset = at & this.mask;
    const first = Math.min(bytes.length, this.data.length - offset);
    this.data.set(bytes.subarray(0, first), offset);
    if (first < bytes.length) this.data.set(bytes.subarray(first), 0);
  }

  private copyOut(at: number, length: number): Uint8Array {
    const offset = at & this.mask;
    if (offset + length <= this.data.length) return this.data.slice(offset, offset + length);
    const out = new Uint8Array(length);
    const first = this.data.length - offset;
    out.set(this.data.subarray(offset), 0);
    out.set(this.data.subarray(0, length - first), first);
    return out;
  }
}
