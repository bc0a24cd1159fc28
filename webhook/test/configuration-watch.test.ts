// Who wrote the webhook's configuration last, as the watch of it decides. The watch itself runs
// against a real SKR API server in test/integration/webhook-configuration.test.ts.
import { expect } from 'chai';
import { SKR_WEBHOOK_REGISTRATION } from '@skr-watcher/api';
import { lastWriters, tamperedBecause } from '../src/configuration-watch.js';

const ours = SKR_WEBHOOK_REGISTRATION.fieldManager;
const entry = (manager: string, time: string) => ({ manager, time });

describe('webhook configuration watch: whose write it was', () => {
  it('the registration wrote it last: nothing to report', () => {
    const object = {
      metadata: {
        managedFields: [entry('kubectl-edit', '2026-01-01T10:00:00Z'), entry(ours, '2026-01-01T10:00:05Z')],
      },
    };
    expect(lastWriters(object)).to.deep.equal([ours]);
    expect(tamperedBecause(object)).to.equal(undefined);
  });

  it('another writer after the registration, a tie in the same second, or no managedFields: reported', () => {
    expect(
      tamperedBecause({
        metadata: {
          managedFields: [
            entry(ours, '2026-01-01T10:00:00Z'),
            entry('kubectl-patch', '2026-01-01T10:00:01Z'),
          ],
        },
      }),
    ).to.equal('changed by kubectl-patch');
    expect(
      tamperedBecause({
        metadata: {
          managedFields: [entry(ours, '2026-01-01T10:00:00Z'), entry('skr-user', '2026-01-01T10:00:00Z')],
        },
      }),
    ).to.equal('changed by skr-user');
    expect(tamperedBecause({ metadata: {} })).to.equal('its managedFields were removed');
  });
});
