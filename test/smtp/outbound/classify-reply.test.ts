/**
 * The reply classification table, case by case, with replies as real servers
 * send them (Gmail, Outlook, Yahoo, Postfix, Exim, Domino).
 */
import test from 'ava';
import { classifyConnectionFailure, classifyReply, parseEnhancedCode, parseRetryHintMs } from '../../../src/smtp/outbound/classify-reply.js';
import type { ReplyCategory } from '../../../src/smtp/outbound/classify-reply.js';

type Expect = { kind: 'deferred' | 'bounced'; hard?: boolean; category?: ReplyCategory; retryAfterMs?: number };

const cases: [number, string, Expect][] = [
  // Mailbox does not exist / disabled: hard bounce (suppressed).
  [550, '550-5.1.1 The email account that you tried to reach does not exist. Please try double-checking', { kind: 'bounced', hard: true, category: 'recipient' }],
  [550, '5.1.1 <bob@example.com>: Recipient address rejected: User unknown in virtual mailbox table', { kind: 'bounced', hard: true, category: 'recipient' }],
  [550, '550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup', { kind: 'bounced', hard: true }],
  [550, '550 5.1.0 Address rejected', { kind: 'bounced', hard: true }],
  [550, '550 5.2.1 The email account that you tried to reach is disabled.', { kind: 'bounced', hard: true }],
  [550, '550 No such user here', { kind: 'bounced', hard: true, category: 'recipient' }],
  [550, '550 Requested action not taken: mailbox unavailable', { kind: 'bounced', hard: true }],
  [554, '554 delivery error: dd This user doesn\'t have a yahoo.com account (bob@yahoo.com) [0]', { kind: 'bounced', hard: true }],
  [550, '550 Recipient rejected', { kind: 'bounced', hard: true }],
  [550, '550 5.0.0 <bob@example.com>... User unknown', { kind: 'bounced', hard: true }],
  [550, '550 5.1.1 bob@example.com not listed in Domino Directory', { kind: 'bounced', hard: true }],
  // "try again" in passing does not outrank the structured code; a generic code defers to the text.
  [550, '550 5.1.1 user unknown; please try again with a valid address', { kind: 'bounced', hard: true, category: 'recipient' }],
  [550, '550 5.1.1 Recipient mailbox busy or unknown', { kind: 'bounced', hard: true, category: 'recipient' }],
  [550, '550 5.5.0 Requested action not taken: mailbox unavailable (S2017062302)', { kind: 'bounced', hard: true, category: 'recipient' }],
  [550, '550 5.5.0 Requested action not taken: blocked using Spamhaus', { kind: 'bounced', hard: false, category: 'blocklist' }],
  [554, '554 5.5.0 Syntax error in parameters', { kind: 'bounced', hard: false, category: 'system' }],
  // Policy, spam, blocklists: bounced without suppressing the recipient.
  [550, '550-5.7.1 [203.0.113.9] Our system has detected an unusual rate of unsolicited mail originating from your IP address. To protect our users from spam, mail sent from your IP address has been blocked.', { kind: 'bounced', hard: false, category: 'blocklist' }],
  [554, '554 5.7.1 Service unavailable; Client host [203.0.113.9] blocked using zen.spamhaus.org', { kind: 'bounced', hard: false, category: 'blocklist' }],
  [550, '550 5.7.26 This mail is unauthenticated, which poses a security risk to the sender and Gmail users', { kind: 'bounced', hard: false, category: 'policy' }],
  [550, '550 5.7.1 <bob@example.com>: Recipient address rejected: Access denied', { kind: 'bounced', hard: false, category: 'policy' }],
  [550, '550 5.7.606 Access denied, banned sending IP [203.0.113.9]', { kind: 'bounced', hard: false }],
  [554, '554 Recipient address rejected: blocked using bl.spamcop.net', { kind: 'bounced', hard: false, category: 'blocklist' }],
  [553, '553 5.3.0 flpd575 DNSBL:RBL 521< 203.0.113.9 >_is_blocked', { kind: 'bounced', hard: false, category: 'blocklist' }],
  [550, '550 Your IP is listed on a blacklist', { kind: 'bounced', hard: false, category: 'blocklist' }],
  [554, '554 Message rejected as spam', { kind: 'bounced', hard: false, category: 'spam' }],
  [550, '550 Rejected by policy', { kind: 'bounced', hard: false, category: 'policy' }],
  // Mailbox full: bounced soft on 5xx, deferred on 4xx.
  [552, '552-5.2.2 The email account that you tried to reach is over quota.', { kind: 'bounced', hard: false, category: 'mailbox-full' }],
  [552, '552 Mailbox full', { kind: 'bounced', hard: false, category: 'mailbox-full' }],
  [452, '452-4.2.2 The email account that you tried to reach is over quota.', { kind: 'deferred', category: 'mailbox-full' }],
  // 5xx texts that mean "later".
  [550, '550 5.7.1 Too many connections, try again later', { kind: 'deferred' }],
  [554, '554 5.7.1 Service temporarily unavailable', { kind: 'deferred' }],
  [552, '552 5.5.3 Too many recipients', { kind: 'deferred' }], // RFC 5321 4.5.3.1.10
  [550, '550 5.7.1 greylisted, please try again in 5 minutes', { kind: 'deferred', retryAfterMs: 5 * 60_000 }],
  // Transient replies.
  [421, '421 4.7.0 [TSS04] Messages from 203.0.113.9 temporarily deferred due to unexpected volume or user complaints', { kind: 'deferred' }],
  [421, '421 Service not available, closing transmission channel', { kind: 'deferred' }],
  [450, '450 4.2.1 The user you are trying to contact is receiving mail too quickly. Try again in 30 seconds', { kind: 'deferred', retryAfterMs: 30_000 }],
  [451, '451 4.7.1 Greylisting in action, please come back later', { kind: 'deferred', category: 'rate' }],
  [451, '451 4.3.0 Temporary local problem, retry in 2 hours', { kind: 'deferred', retryAfterMs: 2 * 3_600_000 }],
  [452, '452 4.5.3 Too many recipients', { kind: 'deferred' }],
  [450, '450 4.1.1 <bob@example.com>: Recipient address rejected: unverified address', { kind: 'deferred', hard: false }],
  // About our MAIL FROM, though it comes at RCPT with a dead-mailbox code (Postfix smtpd_delay_reject): never hard.
  [550, '550 5.1.0 <bounces+em_1@b.example.com>: Sender address rejected: User unknown in local recipient table', { kind: 'bounced', hard: false, category: 'sender' }],
  [554, '554 5.0.0 <bob@example.net>: Sender domain does not exist', { kind: 'bounced', hard: false, category: 'sender' }],
  [550, '550 5.1.1 Sender verify failed', { kind: 'bounced', hard: false, category: 'sender' }],
  [554, '554 Message rejected: Email address is not verified. The following identities failed the check in region US-EAST-1: x@example.com', { kind: 'bounced', hard: false, category: 'sender' }],
  [450, '450 4.1.8 <bounces+em_1@b.example.com>: Sender address rejected: Domain not found', { kind: 'deferred', hard: false }],
  // Unknown replies.
  [550, '550 Denied', { kind: 'bounced', hard: false, category: 'other' }],
  [554, '554 Transaction failed', { kind: 'bounced', hard: false }],
  [499, 'something odd', { kind: 'deferred' }],
  [250, '250 OK', { kind: 'deferred' }], // not a failure: never bounce on it
];

for (const [code, response, expected] of cases) {
  test(`${code} ${response.slice(0, 70)}`, (t) => {
    const c = classifyReply(code, response);
    t.is(c.kind, expected.kind, c.reason);
    t.is(c.hardBounce, expected.hard ?? false, c.reason);
    if (expected.category) t.is(c.category, expected.category, c.reason);
    t.is(c.retryAfterMs, expected.retryAfterMs);
    t.true(c.reason.length > 0);
  });
}

test('a deferral never carries hardBounce and a bounce never carries a retry hint', (t) => {
  t.false(classifyReply(450, '450 4.1.1 user unknown').hardBounce);
  t.is(classifyReply(550, '550 5.1.1 user unknown, try again in 5 minutes').kind, 'deferred');
  const blocked = classifyReply(550, '550 5.7.1 blocked; wait 5 minutes before asking for delisting');
  t.is(blocked.kind, 'bounced');
  t.is(blocked.retryAfterMs, undefined);
});

test('parseEnhancedCode reads RFC 3463 codes after the reply code, and not IP addresses', (t) => {
  t.is(parseEnhancedCode('550 5.1.1 User unknown'), '5.1.1');
  t.is(parseEnhancedCode('550-5.7.26 unauthenticated\r\n550-5.7.26 more'), '5.7.26');
  t.is(parseEnhancedCode('5.1.10 RESOLVER.ADR.RecipientNotFound'), '5.1.10');
  t.is(parseEnhancedCode('452 4.2.2 over quota'), '4.2.2');
  t.is(parseEnhancedCode('550 Requested action not taken: mailbox unavailable (5.1.1)'), '5.1.1');
  t.is(parseEnhancedCode('554 Client host 5.1.1.9 blocked'), undefined);
  t.is(parseEnhancedCode('554 Client host 10.5.1.1 blocked'), undefined);
  t.is(parseEnhancedCode('550 User unknown'), undefined);
  t.is(parseEnhancedCode(''), undefined);
});

test('parseRetryHintMs understands seconds, minutes and hours and caps absurd values', (t) => {
  t.is(parseRetryHintMs('try again in 90 seconds'), 90_000);
  t.is(parseRetryHintMs('Please try again in 5 min'), 300_000);
  t.is(parseRetryHintMs('retry after 2 hours'), 7_200_000);
  t.is(parseRetryHintMs('wait 30s'), 30_000);
  t.is(parseRetryHintMs('try again in 9999 hours'), 24 * 3_600_000);
  t.is(parseRetryHintMs('try again later'), undefined);
  t.is(parseRetryHintMs('tried 3 times'), undefined);
});

test('connection-level failures always defer and keep a greeting hint', (t) => {
  const refused = classifyConnectionFailure('connect ECONNREFUSED 127.0.0.1:25');
  t.is(refused.kind, 'deferred');
  t.false(refused.hardBounce);
  t.is(refused.category, 'connection');
  const greeting = classifyConnectionFailure('greeting refused', '421 4.7.0 Too busy, try again in 10 minutes');
  t.is(greeting.kind, 'deferred');
  t.is(greeting.retryAfterMs, 600_000);
  t.is(classifyConnectionFailure('554 no SMTP service here', '554 no SMTP service here').kind, 'deferred');
});

test('a reply that names our MAIL FROM address is about the sender, whatever its code says', (t) => {
  const mailFrom = 'bounces+em_42@bounce.example.com';
  const c = classifyReply(550, '550 5.1.1 <Bounces+em_42@bounce.example.com>: rejected', { mailFrom });
  t.is(c.kind, 'bounced');
  t.false(c.hardBounce);
  t.is(c.category, 'sender');
  // Without the context the same reply reads as a dead mailbox.
  t.true(classifyReply(550, '550 5.1.1 <bounces+em_42@bounce.example.com>: rejected').hardBounce);
});

test('with a relay configured, the relay refusing us (auth, relaying, an unverified sender) defers: it is the operator\'s setting', (t) => {
  for (const [code, reply] of [
    [530, '530 5.7.0 Authentication required'],
    [535, '535 5.7.8 Error: authentication failed: authentication failure'],
    [554, '554 5.7.1 <bob@example.net>: Relay access denied'],
    [554, '554 Message rejected: Email address is not verified. The following identities failed the check: x@example.com'],
    [550, '550 5.7.1 Client not authorized to relay'],
  ] as const) {
    const c = classifyReply(code, reply, { relay: true });
    t.is(c.kind, 'deferred', reply);
    t.false(c.hardBounce, reply);
    t.regex(c.reason, /relay settings/, reply);
  }
  // The relay's own verdicts on a recipient still count.
  const unknown = classifyReply(550, '550 5.1.1 <bob@example.net>: Recipient address rejected: User unknown', { relay: true });
  t.is(unknown.kind, 'bounced');
  t.true(unknown.hardBounce);
  // Without a relay the same 554 is a policy bounce from the destination.
  t.is(classifyReply(554, '554 5.7.1 <bob@example.net>: Relay access denied').kind, 'bounced');
});

test('a 1 MB reply of white space before its code is read (a remote writes what it likes)', (t) => {
  // A leading \s* before the optional reply code's own made this quadratic: about 20 minutes.
  // The test's timeout is the check.
  const spaces = ' '.repeat(1024 * 1024);
  t.is(parseEnhancedCode(`${spaces}x`), undefined);
  t.is(parseEnhancedCode(`${spaces}550 5.1.1 User unknown`), '5.1.1');
  t.is(classifyReply(550, `${spaces}5.1.1 no such user`).category, classifyReply(550, '5.1.1 no such user').category);
});
