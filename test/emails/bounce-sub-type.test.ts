import test from 'ava';
import { bounceSubType } from '../../src/core/deliveries/bounce-sub-type.js';
import { classifyReply } from '../../src/smtp/outbound/classify-reply.js';

// The webhook's bounce.subType for replies as real servers send them (SES/usesend words).
const cases: [number, string, string][] = [
  [550, '550 5.1.1 user unknown', 'NoEmail'],
  [552, '552-5.2.2 The email account that you tried to reach is over quota.', 'MailboxFull'],
  [552, '552 5.3.4 Message size exceeds fixed limit', 'MessageTooLarge'],
  [554, '554 5.6.0 Message rejected: invalid MIME', 'ContentRejected'],
  [554, '554 Message rejected as spam', 'ContentRejected'],
  [554, '554 5.7.1 Client host blocked using zen.spamhaus.org', 'Policy'],
  [550, '550 5.7.26 This mail is unauthenticated', 'Policy'],
  [550, '550 Denied', 'General'],
];
for (const [code, response, subType] of cases) {
  test(`${response} -> ${subType}`, (t) => {
    const c = classifyReply(code, response);
    t.is(bounceSubType({ category: c.category, response }), subType);
  });
}
