import type {
  BlockNode,
  ButtonNode,
  EditorDoc,
  HeadingNode,
  InlineNode,
  Mark,
  ParagraphNode,
  SpacerNode,
  TextAlign,
} from '../../render/editor-document.js';

/*
 * Starter templates every new team gets. They are ordinary editor documents,
 * so teams can open and restyle them in the editor; variables are left as
 * placeholders and filled in per message at send time.
 */

export interface DefaultTemplate {
  name: string;
  subject: string;
  /** Editor document, JSON-encoded as stored. */
  content: string;
}

// Small builders keep the documents below readable.

type Inline = string | InlineNode;

function inline(parts: Inline[]): InlineNode[] {
  return parts.map((p) => (typeof p === 'string' ? { type: 'text', text: p } : p));
}

function text(value: string, ...marks: Mark[]): InlineNode {
  return marks.length > 0 ? { type: 'text', text: value, marks } : { type: 'text', text: value };
}

function variable(id: string, fallback?: string): InlineNode {
  return fallback === undefined ? { type: 'variable', attrs: { id } } : { type: 'variable', attrs: { id, fallback } };
}

const bold: Mark = { type: 'bold' };

function link(href: string): Mark {
  return { type: 'link', attrs: { href, target: '_blank' } };
}

const muted: Mark = { type: 'textStyle', attrs: { color: '#6b7280', fontSize: '13px' } };

function heading(level: 1 | 2 | 3, parts: Inline[], textAlign?: TextAlign): HeadingNode {
  return { type: 'heading', attrs: textAlign ? { level, textAlign } : { level }, content: inline(parts) };
}

function paragraph(parts: Inline[], textAlign?: TextAlign): ParagraphNode {
  return textAlign ? { type: 'paragraph', attrs: { textAlign }, content: inline(parts) } : { type: 'paragraph', content: inline(parts) };
}

/** Footer text: small and grey, set with marks so the editor can still change it. */
function footnote(parts: Inline[], textAlign?: TextAlign): ParagraphNode {
  return paragraph(
    parts.map((p) => (typeof p === 'string' ? text(p, muted) : p.type === 'text' ? { ...p, marks: [...(p.marks ?? []), muted] } : p)),
    textAlign,
  );
}

function button(label: string, url: string, alignment: 'left' | 'center' = 'left'): ButtonNode {
  return {
    type: 'button',
    attrs: {
      text: label,
      url,
      alignment,
      borderRadius: 6,
      buttonColor: '#2563eb',
      textColor: '#ffffff',
      borderColor: '#2563eb',
      borderWidth: 0,
    },
  };
}

function spacer(height: 'sm' | 'md' | 'lg' | 'xl'): SpacerNode {
  return { type: 'spacer', attrs: { height } };
}

const rule: BlockNode = { type: 'horizontalRule' };

function listItem(parts: Inline[]) {
  return { type: 'listItem' as const, content: [paragraph(parts)] };
}

const firstName = variable('firstName', 'there');
const productName = variable('productName', 'our app');
const companyName = variable('companyName', 'The team');

function doc(content: BlockNode[]): EditorDoc {
  return { type: 'doc', content };
}

const welcome = doc([
  heading(1, ['Welcome aboard, ', firstName, '!']),
  paragraph([
    "We're glad you're here. Your ",
    productName,
    ' account is ready, and you can start right away. Here are a few things most people do first:',
  ]),
  {
    type: 'bulletList',
    content: [
      listItem([text('Complete your profile', bold), ' so your teammates know who you are.']),
      listItem([text('Invite your team', bold), ' to collaborate in one place.']),
      listItem([text('Explore the guides', bold), ' to get the most out of every feature.']),
    ],
  },
  spacer('sm'),
  button('Get started', '{{dashboardUrl}}'),
  spacer('md'),
  paragraph(['Questions or feedback? Just reply to this email, a real person reads every message.']),
  paragraph(['Cheers,', { type: 'hardBreak' }, companyName]),
  rule,
  { type: 'unsubscribeFooter', content: inline(["You're receiving this email because you signed up for ", productName, '.']) },
]);

const verifyEmail = doc([
  heading(1, ['Confirm your email address'], 'center'),
  paragraph(['Hi ', firstName, ','], 'center'),
  paragraph(
    ['Please confirm that ', variable('email', 'this'), ' is your email address by clicking the button below.'],
    'center',
  ),
  spacer('sm'),
  button('Verify email', '{{verifyUrl}}', 'center'),
  spacer('md'),
  footnote(['This link expires in ', variable('expiresIn', '24 hours'), '. If the button does not work, copy this link into your browser:'], 'center'),
  footnote([text('{{verifyUrl}}', link('{{verifyUrl}}'))], 'center'),
  rule,
  footnote(["If you didn't create an account with ", productName, ', you can safely ignore this email.'], 'center'),
]);

const passwordReset = doc([
  heading(1, ['Reset your password']),
  paragraph(['Hi ', firstName, ',']),
  paragraph([
    'We received a request to reset the password for your ',
    productName,
    ' account. Click the button below to choose a new one.',
  ]),
  spacer('sm'),
  button('Reset password', '{{resetUrl}}'),
  spacer('md'),
  paragraph(['This link expires in ', variable('expiresIn', '1 hour'), ' and can only be used once.']),
  rule,
  footnote([
    "If you didn't ask to reset your password, you can safely ignore this email: your password will not change.",
  ]),
]);

const paymentReceipt = doc([
  heading(1, ['Thanks for your payment']),
  paragraph(['Hi ', firstName, ', we received your payment. Here is your receipt for your records.']),
  heading(3, ['Payment summary']),
  paragraph([
    text('Amount paid: ', bold),
    variable('amount'),
    { type: 'hardBreak' },
    text('Date: ', bold),
    variable('paymentDate'),
    { type: 'hardBreak' },
    text('Invoice number: ', bold),
    variable('invoiceNumber'),
    { type: 'hardBreak' },
    text('Payment method: ', bold),
    variable('paymentMethod', 'Card on file'),
  ]),
  spacer('sm'),
  button('View invoice', '{{invoiceUrl}}'),
  spacer('md'),
  paragraph(['You can download a PDF copy of this invoice at any time from your billing settings.']),
  rule,
  footnote([
    'Questions about this charge? Reply to this email and we will be happy to help.',
    { type: 'hardBreak' },
    companyName,
  ]),
]);

const productUpdate = doc([
  heading(1, ["What's new in ", productName]),
  paragraph([
    'Hi ',
    firstName,
    ", here's a quick look at what we shipped this month. As always, thank you for the feedback that shaped it.",
  ]),
  spacer('sm'),
  heading(2, ['A faster dashboard']),
  paragraph(['Pages now load up to twice as fast, and your most-used views are one click away from the sidebar.']),
  heading(2, ['Smarter notifications']),
  paragraph(['Choose exactly which events reach you, and get a daily digest instead of a busy inbox.']),
  heading(3, ['Also improved']),
  {
    type: 'bulletList',
    content: [
      listItem(['Search now matches partial words and typos.']),
      listItem(['Exports include every custom field.']),
      listItem(['Dozens of small fixes across the app.']),
    ],
  },
  spacer('sm'),
  button('See all updates', '{{changelogUrl}}'),
  spacer('md'),
  rule,
  { type: 'unsubscribeFooter', content: inline(["You're receiving product updates from ", productName, '.']) },
]);

export const DEFAULT_TEMPLATES: DefaultTemplate[] = [
  { name: 'Welcome', subject: 'Welcome to {{productName,fallback=our app}}, {{firstName,fallback=there}}!', content: JSON.stringify(welcome) },
  { name: 'Verify email', subject: 'Confirm your email address', content: JSON.stringify(verifyEmail) },
  { name: 'Password reset', subject: 'Reset your {{productName,fallback=account}} password', content: JSON.stringify(passwordReset) },
  { name: 'Payment receipt', subject: 'Your receipt for {{amount}}', content: JSON.stringify(paymentReceipt) },
  { name: 'Product update', subject: "What's new in {{productName,fallback=our app}}", content: JSON.stringify(productUpdate) },
];
