import { Parser } from 'htmlparser2';

/*
 * A strict-ish look at rendered email HTML: htmlparser2 is forgiving, so we
 * record what it had to fix (implied or stray closing tags) and everything an
 * email must never contain.
 */

const VOID = new Set(['area', 'base', 'br', 'col', 'embed', 'hr', 'img', 'input', 'link', 'meta', 'source', 'track', 'wbr']);
const FORBIDDEN_TAGS = new Set(['script', 'link', 'style', 'iframe', 'object', 'embed', 'form', 'base', 'frame', 'frameset', 'svg', 'math']);
const URL_ATTRS = new Set(['href', 'src', 'background', 'action', 'formaction', 'xlink:href', 'poster', 'srcset']);
const ALLOWED_URL = /^(?:https?:\/\/|mailto:|\{\{)/i;

export interface ParsedElement {
  name: string;
  attribs: Record<string, string>;
}

export interface HtmlInspection {
  elements: ParsedElement[];
  problems: string[];
  text: string;
}

export function inspectHtml(html: string): HtmlInspection {
  const elements: ParsedElement[] = [];
  const problems: string[] = [];
  const stack: string[] = [];
  let text = '';

  const parser = new Parser(
    {
      onopentag(name, attribs) {
        elements.push({ name, attribs });
        if (FORBIDDEN_TAGS.has(name)) problems.push(`forbidden element <${name}>`);
        for (const [attr, value] of Object.entries(attribs)) {
          if (/^on/i.test(attr)) problems.push(`event handler attribute ${attr} on <${name}>`);
          if (URL_ATTRS.has(attr) && !ALLOWED_URL.test(value.trim())) problems.push(`disallowed URL in ${name}[${attr}]: ${value}`);
          if (attr === 'style' && /url\s*\(|expression\s*\(|@import|javascript:|behavior\s*:/i.test(value)) {
            problems.push(`unsafe CSS in <${name} style="${value}">`);
          }
        }
        if (name === 'meta' && (attribs['http-equiv'] ?? '').toLowerCase() === 'refresh') problems.push('meta refresh');
        if (!VOID.has(name)) stack.push(name);
      },
      onclosetag(name, isImplied) {
        if (VOID.has(name)) return;
        if (isImplied) problems.push(`<${name}> was closed implicitly`);
        const top = stack.pop();
        if (top !== name) problems.push(`closing </${name}> while <${top}> is open`);
      },
      ontext(data) {
        text += data;
      },
      onprocessinginstruction(name) {
        if (name.toLowerCase() !== '!doctype') problems.push(`processing instruction ${name}`);
      },
    },
    { decodeEntities: true },
  );
  parser.write(html);
  parser.end();
  if (stack.length > 0) problems.push(`unclosed elements: ${stack.join(', ')}`);
  return { elements, problems, text };
}
