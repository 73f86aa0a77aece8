// What the inbound SMTP edge hands to core after parsing: plain data, no MIME library types.

/** One per-recipient block of an RFC 3464 delivery-status report (section 2.3). */
export interface DsnRecipient {
  /** Address of the Final-Recipient field (address type rfc822 or utf-8, RFC 6533). */
  finalRecipient: string | null;
  originalRecipient: string | null;
  /** failed | delayed | delivered | relayed | expanded (RFC 3464 2.3.3), lowercased. */
  action: string;
  /** Enhanced status code (RFC 3463), e.g. "5.1.1". */
  status: string | null;
  /** The remote's reply without its type prefix, e.g. "550 5.1.1 user unknown". */
  diagnosticCode: string | null;
  /** Basic SMTP reply code taken from the diagnostic, when it is an SMTP one. */
  smtpCode: number | null;
  remoteMta: string | null;
  willRetryUntil: string | null;
  /** How the edge's reply classifier reads it: the address is dead (suppress) or not. */
  hardBounce: boolean;
  category: string;
  /** Where the block came from: a delivery-status part, or a plain-text bounce (text-bounce.ts). */
  source?: 'dsn' | 'text';
}

/** What made a message that is not a DSN a bounce (smtp/inbound/text-bounce.ts). */
export interface TextBounce {
  /** Exim's X-Failed-Recipients field, or the null reverse-path with a recognised bounce text. */
  evidence: 'x-failed-recipients' | 'bounce-text';
  /** The reporting host when the text names it (qmail's "qmail-send program at <host>"). */
  reportingMta: string | null;
}

/** The machine-readable part of an RFC 5965 feedback report (section 3.1, 3.2). */
export interface FeedbackReport {
  /** abuse | fraud | virus | other | not-spam | auth-failure ..., lowercased; '' when missing. */
  feedbackType: string;
  userAgent: string | null;
  originalMailFrom: string | null;
  originalRcptTo: string[];
  arrivalDate: string | null;
  sourceIp: string | null;
  reportedDomain: string | null;
}

/** Identifying headers of the returned original message (message/rfc822 or text/rfc822-headers). */
export interface OriginalMessageRef {
  messageId: string | null;
  /** Our own X-Posthorn-Email-ID header, copied back by most reporters. */
  posthornEmailId: string | null;
  returnPath: string | null;
  to: string[];
}

export interface ParsedReport {
  /** 'text': a plain-text bounce, its recipients read into DSN blocks (action failed or delayed). */
  type: 'dsn' | 'arf' | 'text' | 'other';
  reportingMta: string | null;
  recipients: DsnRecipient[];
  /** Set for type 'text'. */
  textBounce?: TextBounce | null;
  feedback: FeedbackReport | null;
  original: OriginalMessageRef | null;
  subject: string | null;
  from: string | null;
}

/** Envelope and connection facts of one SMTP transaction. */
export interface InboundEnvelope {
  /** '' for the null reverse-path (RFC 5321 4.5.5: DSNs use it). */
  mailFrom: string;
  rcptTo: string[];
  remoteIp: string | null;
  helo: string | null;
  tls: boolean;
}

export interface AuthCheck {
  result: string;
  domain: string | null;
}

export interface DkimSignatureCheck {
  result: string;
  domain: string | null;
  selector: string | null;
  aligned: boolean;
}

/** SPF (RFC 7208), DKIM (RFC 6376) and DMARC (RFC 7489) verdicts as mailauth found them. */
export interface AuthResults {
  spf: AuthCheck;
  dkim: { result: string; signatures: DkimSignatureCheck[] };
  dmarc: AuthCheck & { policy: string | null };
  /** The Authentication-Results header (RFC 8601) we prepended to the stored message. */
  header: string;
}

export interface ReceivedAttachmentInput {
  filename: string | null;
  contentType: string;
  contentId: string | null;
  disposition: string | null;
  content: Buffer;
}

/** A message for receiving domains, parsed as far as it would parse. */
export interface ReceivedMessageInput {
  envelope: InboundEnvelope;
  /** Stored bytes: the message with our trace fields prepended. */
  raw: Buffer;
  /** Size of the message as received. */
  sizeBytes: number;
  /** Hex SHA-256 of the message as received (transaction-key.ts messageDigest). */
  digest: string;
  messageId: string | null;
  from: string | null;
  to: string[];
  cc: string[];
  replyTo: string[];
  subject: string | null;
  text: string | null;
  html: string | null;
  headers: { name: string; value: string }[];
  inReplyTo: string | null;
  references: string[] | null;
  date: string | null;
  attachments: ReceivedAttachmentInput[];
  auth: AuthResults;
}
