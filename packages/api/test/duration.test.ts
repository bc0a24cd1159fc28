// One duration grammar for every flag: Go's time.ParseDuration (kubectl, controller-runtime) plus days.
import { expect } from 'chai';
import fc from 'fast-check';
import { DurationError, TIMER_MAX_MS, formatDuration, parseDuration } from '../src/index.js';

describe('parseDuration', () => {
  it('reads what kubectl and controller-runtime flags accept', () => {
    const cases: [string, number][] = [
      ['0', 0],
      ['0s', 0],
      ['500ms', 500],
      ['30s', 30_000],
      ['10m', 600_000],
      ['1h', 3_600_000],
      ['1h30m', 5_400_000],
      ['2h45m30s', 9_930_000],
      ['1.5h', 5_400_000],
      ['.5s', 500],
      ['1m0.25s', 60_250],
      ['1500us', 2],
      ['2000000ns', 2],
      ['7d', 604_800_000],
      ['1d12h', 129_600_000],
    ];
    for (const [text, ms] of cases) expect(parseDuration(text), text).to.equal(ms);
  });

  it('refuses malformed text with a message that says what was expected', () => {
    const cases: [string, RegExp][] = [
      ['', /empty value is not a duration such as 500ms/],
      ['500', /"500" has no unit: write 500s, 500ms/],
      ['1.5', /has no unit/],
      ['-5s', /"-5s" is negative/],
      [
        'soon',
        /"soon" is not a duration such as 500ms, 30s, 10m, 1h30m or 7d \(units ns, us, ms, s, m, h, d\)/,
      ],
      ['5 minutes', /"5 minutes" is not a duration/],
      ['5min', /cannot read "in"/],
      ['1h 30m', /cannot read " 30m"/],
      ['5s ', /cannot read " "/],
      ['h', /is not a duration/],
      ['5S', /is not a duration/],
      ['1e3s', /"1e3s" is not a duration/],
    ];
    for (const [text, message] of cases) {
      expect(() => parseDuration(text), JSON.stringify(text))
        .to.throw(DurationError)
        .with.property('message')
        .that.matches(message);
    }
  });

  it('refuses a duration above the caller’s maximum, naming it', () => {
    expect(parseDuration('24d', TIMER_MAX_MS)).to.equal(24 * 86_400_000);
    expect(() => parseDuration('25d', TIMER_MAX_MS)).to.throw(
      DurationError,
      /longer than the maximum, 596h31m23.647s/,
    );
  });

  it('reads back every duration formatDuration writes (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 400 * 86_400_000 }),
        (ms) => parseDuration(formatDuration(ms)) === ms,
      ),
    );
  });

  it('formats as Go prints durations', () => {
    expect(formatDuration(0)).to.equal('0');
    expect(formatDuration(1_500)).to.equal('1.5s');
    expect(formatDuration(999)).to.equal('999ms');
    expect(formatDuration(300_000)).to.equal('5m');
    expect(formatDuration(5_400_000)).to.equal('1h30m');
    expect(formatDuration(30_000)).to.equal('30s');
  });

  it('never throws anything but DurationError, whatever the text (property)', () => {
    fc.assert(
      fc.property(fc.string(), (text) => {
        try {
          const ms = parseDuration(text);
          return Number.isSafeInteger(ms) && ms >= 0;
        } catch (error) {
          return error instanceof DurationError;
        }
      }),
    );
  });
});
