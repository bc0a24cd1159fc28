// What the listener answers: JSON bodies with Kubernetes-style reasons, the raw answer to malformed HTTP, and the 503
// (with Retry-After) for a callback that did not reach its Kyma's owner.
import { expect } from 'chai';
import { LISTENER_STATUS } from '@skr-watcher/api';
import {
  NotTakenYetError,
  answerBody,
  malformedRequestAnswer,
  undeliveredAnswer,
} from '../src/listener/answers.js';

describe('listener answers', () => {
  it('says code, reason and message in JSON, one accepted body for every accepted callback', () => {
    expect(JSON.parse(answerBody({ code: 403, message: 'no Kyma' }))).to.deep.equal({
      code: 403,
      reason: 'Forbidden',
      message: 'no Kyma',
    });
    expect(JSON.parse(answerBody({ code: 418, message: 'teapot' })), 'an unnamed code').to.include({
      reason: 'Error',
    });
    const accepted = answerBody({ code: LISTENER_STATUS.accepted, message: 'ignored' });
    expect(JSON.parse(accepted)).to.deep.equal({
      code: LISTENER_STATUS.accepted,
      reason: 'Accepted',
      message: 'event accepted; the Kyma is queued for reconciliation',
    });
    expect(answerBody({ code: LISTENER_STATUS.accepted, message: '' })).to.equal(accepted);
  });

  it('answers malformed HTTP as Node would, in JSON, and closes: 431 for big headers, 408 for slow ones, else 400', () => {
    const overflow = malformedRequestAnswer('HPE_HEADER_OVERFLOW');
    expect(overflow.code).to.equal(431);
    const [head = '', body = ''] = overflow.raw.split('\r\n\r\n');
    expect(head.split('\r\n')).to.deep.equal([
      'HTTP/1.1 431 RequestHeaderFieldsTooLarge',
      'Content-Type: application/json',
      `Content-Length: ${Buffer.byteLength(body)}`,
      'Connection: close',
    ]);
    expect(JSON.parse(body)).to.deep.equal({
      code: 431,
      reason: 'RequestHeaderFieldsTooLarge',
      message: 'malformed HTTP request (HPE_HEADER_OVERFLOW)',
    });
    expect(malformedRequestAnswer('ERR_HTTP_REQUEST_TIMEOUT').code).to.equal(408);
    expect(malformedRequestAnswer('HPE_INVALID_METHOD').code).to.equal(400);
    expect(malformedRequestAnswer(undefined).raw).to.contain('malformed HTTP request (unknown)');
  });

  it('asks for the event again after the whole seconds the owner’s Lease runs, at least 1, else after 1', () => {
    const later = undeliveredAnswer(new NotTakenYetError('owner unreachable', 2.1));
    expect(later.code).to.equal(LISTENER_STATUS.unavailable);
    expect(later.headers).to.deep.equal({ 'retry-after': '3' });
    expect(later.message).to.equal(
      'the event did not reach the replica that owns the Kyma: owner unreachable; send it again',
    );
    expect(undeliveredAnswer(new NotTakenYetError('expired already', 0)).headers).to.deep.equal({
      'retry-after': '1',
    });
    expect(undeliveredAnswer(new Error('peer answered 409')).headers).to.deep.equal({ 'retry-after': '1' });
    expect(undeliveredAnswer('a string').message).to.contain(': a string; send it again');
  });
});
