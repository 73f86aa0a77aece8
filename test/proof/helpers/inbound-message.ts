import MailComposer from 'nodemailer/lib/mail-composer';
import type { DnsZone } from '../../helpers/dns-zone.js';
import { dkimSignAs } from '../../helpers/reporter-dkim.js';

// A message as a well-run remote domain sends it: SPF for 127.0.0.1, DKIM-signed with a key
// published in the test zone, DMARC p=none; with cc, Reply-To, HTML, an attachment and
// threading headers, so every field of a received email has a value.

const SELECTOR = 'tour2026';

export async function remoteMessage(zone: DnsZone, fromDomain: string, to: string): Promise<Buffer> {
  zone.set(fromDomain, 'TXT', ['v=spf1 ip4:127.0.0.1 -all']);
  zone.set(`_dmarc.${fromDomain}`, 'TXT', ['v=DMARC1; p=none']);
  const message = await new Promise<Buffer>((resolve, reject) =>
    new MailComposer({
      from: `Partner <someone@${fromDomain}>`,
      to,
      cc: `team@${fromDomain}`,
      replyTo: `replies@${fromDomain}`,
      subject: 'Tour inbound',
      messageId: `<tour-1@${fromDomain}>`,
      inReplyTo: '<earlier@example.com>',
      references: ['<first@example.com>', '<earlier@example.com>'],
      date: new Date(Date.UTC(2026, 10, 23, 9, 0, 0)),
      text: 'Hello there.',
      html: '<p>Hello <b>there</b>.</p>',
      attachments: [{ filename: 'notes.txt', content: 'some notes', contentType: 'text/plain' }],
    })
      .compile()
      .build((err, msg) => (err ? reject(err) : resolve(msg))),
  );
  return dkimSignAs(zone, fromDomain, message, { selector: SELECTOR });
}
