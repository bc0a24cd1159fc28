// Entries backing off, earliest due first: a binary heap, so the dispatcher needs one timer, not one per entry.

/** Anything with a time it is due at (ms on the dispatcher's clock). */
export interface Due {
  dueAt: number;
}

export class DueQueue<T extends Due> {
  private readonly heap: T[] = [];

  get size(): number {
    return this.heap.length;
  }

  peek(): T | undefined {
    return this.heap[0];
  }

  push(item: T): void {
    const heap = this.heap;
    let i = heap.push(item) - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if ((heap[parent] as T).dueAt <= item.dueAt) break;
      heap[i] = heap[parent] as T;
      i = parent;
    }
    heap[i] = item;
  }

  pop(): T | undefined {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop();
    if (top === undefined || last === undefined || heap.length === 0) return top;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= heap.length) break;
      const right = left + 1;
      const child = right < heap.length && (heap[right] as T).dueAt < (heap[left] as T).dueAt ? right : left;
      if ((heap[child] as T).dueAt >= last.dueAt) break;
      heap[i] = heap[child] as T;
      i = child;
    }
    heap[i] = last;
    return top;
  }

  clear(): void {
    this.heap.length = 0;
  }
}
