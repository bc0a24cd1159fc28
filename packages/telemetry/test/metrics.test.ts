import { expect } from 'chai';
import { Counter, LATENCY_BUCKETS_SECONDS, createRegistry, registeredMetric } from '../src/index.js';

describe('telemetry metrics', () => {
  it('a registry carries process metrics (RSS, event-loop lag) under its prefix, and its own series', async () => {
    const registry = createRegistry('skr_test_');
    new Counter({ name: 'skr_test_things_total', help: 'things', registers: [registry] }).inc(3);
    const text = await registry.metrics();
    expect(text).to.match(/^skr_test_process_resident_memory_bytes \d+/m);
    expect(text).to.match(/^skr_test_nodejs_eventloop_lag_seconds /m);
    expect(text).to.match(/^skr_test_nodejs_array_buffers_bytes \d+/m);
    expect(text).to.match(/^skr_test_things_total 3$/m);
  });

  it('two registries do not share series (one per component in one process)', async () => {
    const a = createRegistry('a_');
    const b = createRegistry('b_');
    new Counter({ name: 'only_in_a_total', help: 'a', registers: [a] }).inc();
    expect(await b.metrics()).not.to.include('only_in_a_total');
  });

  it('registeredMetric registers a metric once and hands the same one to every later caller', () => {
    const registry = createRegistry();
    const counter = () =>
      registeredMetric(
        registry,
        'shared_total',
        () => new Counter({ name: 'shared_total', help: 'shared', registers: [registry] }),
      );
    const first = counter();
    expect(counter()).to.equal(first);
    expect(registeredMetric(createRegistry(), 'shared_total', () => 'created')).to.equal('created');
  });

  it('latency buckets rise strictly from 100 µs to 10 s', () => {
    expect(LATENCY_BUCKETS_SECONDS[0]).to.equal(0.0001);
    expect(LATENCY_BUCKETS_SECONDS.at(-1)).to.equal(10);
    LATENCY_BUCKETS_SECONDS.slice(1).forEach((bucket, i) =>
      expect(bucket).to.be.greaterThan(LATENCY_BUCKETS_SECONDS[i] as number),
    );
  });
});
