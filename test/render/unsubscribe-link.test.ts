import test from 'ava';
import { hasUnsubscribePlaceholder, linksToUnsubscribe } from '../../src/render/unsubscribe-link.js';
import { withUnsubscribeLink } from '../../src/core/campaigns/campaign-content.js';

test('the unsubscribe placeholder is found with spaces, a fallback and in any case; other text is not it', (t) => {
  for (const s of ['{{unsubscribeUrl}}', '{{ UNSUBSCRIBEURL }}', 'a {{unsubscribeUrl,fallback=#}} b', '{{unsubscribeUrl, a{b}}', '{{unsubscribeUrl,{{x}}', '{{x}}{{unsubscribeUrl}}'])
    t.true(hasUnsubscribePlaceholder(s), s);
  for (const s of ['', '{{unsubscribeUrl}', '{{unsubscribeUrl,a}b}}', '{{unsubscribeUrlx}}', '{unsubscribeUrl}}', '{{unsubscribeUrl,', '{{unsubscribeUrl,a} {{unsubscribeUrl}'])
    t.false(hasUnsubscribePlaceholder(s), s);
});

test('8 MB of unclosed placeholder openings (a body the API takes) is read, with and without a placeholder after it', (t) => {
  // The pattern scanned from each opening to the next '}': over an hour for this text. The
  // test's timeout is the check.
  const text = '{{unsubscribeUrl,'.repeat(Math.floor((8 * 1024 * 1024) / 17));
  t.false(linksToUnsubscribe([{ type: 'text', text }]));
  t.true(linksToUnsubscribe([{ type: 'text', text: `${text}}}` }]));
  const html = withUnsubscribeLink(text);
  t.true(html.startsWith(text) && html.length > text.length, 'a footer with the link is added');
  t.is(withUnsubscribeLink(`${text}}}`), `${text}}}`);
});
