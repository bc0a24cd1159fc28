// Re-reads of something the API server finishes by itself within moments (a CRD becoming Established, a CRD's
// instance cleanup on deletion): soon at first, then backing off, so a slow one costs few reads.

/** The first wait and the longest one between re-reads. */
export interface PollSchedule {
  firstMs: number;
  maxMs: number;
}

/** The wait before the next re-read, after waiting `previousMs` (0 before the first): doubling up to the max. */
export function nextPollMs(previousMs: number, schedule: PollSchedule): number {
  return previousMs <= 0 ? schedule.firstMs : Math.min(previousMs * 2, schedule.maxMs);
}

export function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
