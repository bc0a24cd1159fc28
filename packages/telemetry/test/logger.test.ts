import { expect } from 'chai';
import { createLogger, silentLogger } from '../src/index.js';

function capture(): { lines: () => Record<string, unknown>[]; stream: { write(line: string): void } } {
  const written: string[] = [];
  return {
    stream: { write: (line: string) => void written.push(line) },
    lines: () => written.map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

describe('telemetry logger', () => {
  let savedLevel: string | undefined;
  beforeEach(() => {
    savedLevel = process.env['LOG_LEVEL'];
    delete process.env['LOG_LEVEL'];
  });
  afterEach(() => {
    if (savedLevel === undefined) delete process.env['LOG_LEVEL'];
    else process.env['LOG_LEVEL'] = savedLevel;
  });

  it('writes one JSON object per line with component, level name and ISO time', () => {
    const out = capture();
    createLogger('skr-agent', 'info', out.stream).info({ runtimeId: 'skr-1' }, 'callback accepted');
    const [line] = out.lines();
    expect(line).to.include({
      component: 'skr-agent',
      level: 'info',
      runtimeId: 'skr-1',
      msg: 'callback accepted',
    });
    expect(new Date(String(line?.['time'])).toISOString()).to.equal(line?.['time']);
  });

  it('never writes private keys or kubeconfigs, wherever they sit in the object', () => {
    const out = capture();
    const logger = createLogger('skr-agent', 'info', out.stream);
    logger.info(
      {
        secret: {
          tls: { key: 'KEY-BYTES' },
          keyPem: 'PEM-BYTES',
          privateKey: 'PRIV-BYTES',
          kubeconfig: 'KC',
        },
        kubeconfig: 'TOP-KC',
      },
      'material loaded',
    );
    const text = JSON.stringify(out.lines());
    for (const secret of ['KEY-BYTES', 'PEM-BYTES', 'PRIV-BYTES', '"KC"', 'TOP-KC']) {
      expect(text).not.to.include(secret);
    }
    expect(text).to.include('[redacted]');
  });

  it('keeps lines below its level, and LOG_LEVEL overrides the level the binary asks for', () => {
    const quiet = capture();
    createLogger('c', 'warn', quiet.stream).info('dropped');
    expect(quiet.lines()).to.deep.equal([]);

    process.env['LOG_LEVEL'] = 'debug';
    const loud = capture();
    createLogger('c', 'warn', loud.stream).debug('kept');
    expect(loud.lines().map((line) => line['msg'])).to.deep.equal(['kept']);
  });

  it('silentLogger discards everything', () => {
    const logger = silentLogger();
    expect(logger.isLevelEnabled('fatal')).to.equal(false);
  });
});
