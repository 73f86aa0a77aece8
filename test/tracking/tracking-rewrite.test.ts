import test from 'ava';
import { applyTracking, decodeAttribute, insertPixel, rewriteLinks } from '../../src/render/tracking-rewrite.js';
import { createTrackingTokens } from '../../src/core/tracking/tracking-tokens.js';

const track = (url: string) => `https://t.example/c?u=${encodeURIComponent(url)}&v=1`;

test('only absolute http(s) hrefs of <a> tags are rewritten, in any quoting, with entities decoded', (t) => {
  const html = [
    '<a href="https://a.example/x?p=1&amp;q=2">A</a>',
    "<a class='btn' href='http://b.example/'>B</a>",
    '<a href=https://c.example/y>C</a>',
    '<a title="x > y" href="https://d.example/">D</a>',
    '<a href="mailto:me@example.com">mail</a>',
    '<a href="tel:+1555">tel</a>',
    '<a href="#top">top</a>',
    '<a href="/relative">rel</a>',
    '<a name="anchor">no href</a>',
    '<a data-posthorn-notrack href="https://e.example/">E</a>',
    '<img src="https://img.example/i.png">',
    '<area href="https://f.example/">',
    '<abbr title="https://g.example/">G</abbr>',
  ].join('\n');
  const seen: string[] = [];
  const out = rewriteLinks(html, (u) => {
    seen.push(u);
    return track(u);
  });
  t.deepEqual(seen, ['https://a.example/x?p=1&q=2', 'http://b.example/', 'https://c.example/y', 'https://d.example/']);
  t.true(out.includes(`<a href="${track('https://a.example/x?p=1&q=2').replace(/&/g, '&amp;')}">A</a>`));
  t.true(out.includes(`<a class='btn' href="${track('http://b.example/').replace(/&/g, '&amp;')}">B</a>`));
  t.true(out.includes(`<a title="x > y" href="`));
  for (const untouched of ['mailto:me@example.com', 'tel:+1555', '"#top"', '"/relative"', '<a name="anchor">', 'data-posthorn-notrack href="https://e.example/"', 'https://img.example/i.png', 'https://f.example/', 'https://g.example/']) {
    t.true(out.includes(untouched), untouched);
  }
  // A rewrite that declines leaves the tag byte for byte.
  t.is(rewriteLinks(html, () => undefined), html);
});

test('an href written inside another attribute\'s value (a personalised title) is text, never the link that is tracked and signed', (t) => {
  // A campaign's <a title="{{firstName}}" href="https://shop.example/"> for a contact who signed up
  // with the first name ' href=https://evil.example/': escaping leaves the spaces and "=", so the
  // tag holds " href=" inside the title. Signing that URL would hand the contact a redirect on
  // the sender's tracking host to a place the sender never linked to.
  const html = [
    '<a title=" href=https://evil.example/phish" href="https://shop.example/">Shop</a>',
    "<a data-x=' href=\"https://evil.example/2\"' href='https://shop.example/2'>Two</a>",
    '<a title="no link here: href=https://evil.example/3">Three</a>',
    '<A class=b HREF = "https://shop.example/4">Four</A>',
  ].join('\n');
  const seen: string[] = [];
  const out = rewriteLinks(html, (u) => {
    seen.push(u);
    return track(u);
  });
  t.deepEqual(seen, ['https://shop.example/', 'https://shop.example/2', 'https://shop.example/4']);
  t.true(out.includes(`<A class=b HREF = "${track('https://shop.example/4').replace(/&/g, '&amp;')}">Four</A>`));
  t.true(out.includes(`<a title=" href=https://evil.example/phish" href="${track('https://shop.example/').replace(/&/g, '&amp;')}">Shop</a>`));
  t.true(out.includes(`<a data-x=' href="https://evil.example/2"' href="${track('https://shop.example/2').replace(/&/g, '&amp;')}">Two</a>`));
  t.true(out.includes('<a title="no link here: href=https://evil.example/3">Three</a>'));
});

test('the pixel goes before the last </body>, or at the end without one', (t) => {
  const px = 'https://t.example/o/tok.gif';
  const out = insertPixel('<html><body><p>x</p></BODY ></html>', px);
  t.regex(out, /<p>x<\/p><img src="https:\/\/t\.example\/o\/tok\.gif" width="1" height="1" alt=""[^>]*\/><\/BODY ><\/html>$/);
  t.regex(insertPixel('<p>fragment</p>', px), /^<p>fragment<\/p><img /);
  t.is(applyTracking('<p>x</p>', {}), '<p>x</p>');
});

test('entity decoding', (t) => {
  t.is(decodeAttribute('a&amp;b&#38;c&#x26;d&quot;e&AMP;f'), 'a&b&c&d"e&f');
  t.is(decodeAttribute('?a=1&b=2&utm_x=3&'), '?a=1&b=2&utm_x=3&', 'an ampersand that starts no reference is itself');
  // What a browser reads otherwise: the link is left as written rather than signed as it stands.
  for (const unreadable of ['caf&eacute;', '&Amp;', '&#38b', '&#x80;', '&#0;', '&#xD800;', '&#x110000;']) t.is(decodeAttribute(unreadable), undefined, unreadable);
});

test('tokens verify only with the secret and only unchanged', (t) => {
  const tokens = createTrackingTokens('s3cret');
  const other = createTrackingTokens('another');
  const open = tokens.open('em_abc');
  t.deepEqual(tokens.verifyOpen(open), { emailId: 'em_abc' });
  t.is(other.verifyOpen(open), null);
  t.is(tokens.verifyOpen(open.replace('em_abc', 'em_abd')), null);
  t.is(tokens.verifyOpen(`${open}.x`), null);

  const click = tokens.click('em_abc', 'https://example.com/a?b=c');
  t.deepEqual(tokens.verifyClick(click), { emailId: 'em_abc', url: 'https://example.com/a?b=c' });
  const [id, , sig] = click.split('.');
  const evil = `${id}.${Buffer.from('https://evil.example/').toString('base64url')}.${sig}`;
  t.is(tokens.verifyClick(evil), null, 'the destination cannot be swapped');
  t.is(tokens.verifyClick(open), null, 'an open token is not a click token');
  t.is(other.verifyClick(click), null);
  t.is(tokens.verifyClick('garbage'), null);
});

test('tags that never close cost time in proportion to the HTML, not its square', (t) => {
  // A sender's HTML of "<a " over and over (no ">") made every "<a" scan to the end of the
  // message: 120 KB held the thread 13 s, 1 MB about 15 minutes, stalling every send and request.
  for (const html of ['<a '.repeat(100_000), '<a title=x '.repeat(30_000), `<a href="https://a.example/">ok</a><a x="${'<a '.repeat(100_000)}`]) {
    const started = Date.now();
    rewriteLinks(html, track);
    t.true(Date.now() - started < 2000, `${html.slice(0, 12)}...: ${Date.now() - started} ms`);
  }
  // A tag whose quoted value never ends swallows the rest, as in a browser: nothing after it is a link.
  const seen: string[] = [];
  rewriteLinks(`<a href="https://a.example/">A</a><a title='never closed <a href="https://b.example/">B</a>`, (u) => {
    seen.push(u);
    return track(u);
  });
  t.deepEqual(seen, ['https://a.example/']);
});
