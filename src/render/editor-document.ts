import { RenderError } from './render-error.js';
import { VARIABLE_NAME_PATTERN } from './variables.js';

/*
 * The editor document: TipTap/ProseMirror JSON as produced by the useSend
 * email editor. The types describe the documents parseEditorDocument returns
 * (only known attributes, null attributes removed) and are loose enough to be
 * written by hand, as the default templates are.
 */

export type TextAlign = 'left' | 'center' | 'right' | 'justify';
export type Alignment = 'left' | 'center' | 'right';
export type SpacerSize = 'sm' | 'md' | 'lg' | 'xl';
export type LogoSize = 'sm' | 'md' | 'lg';

export interface BoldMark { type: 'bold' }
export interface ItalicMark { type: 'italic' }
export interface UnderlineMark { type: 'underline' }
export interface StrikeMark { type: 'strike' }
export interface CodeMark { type: 'code' }
export interface LinkMark { type: 'link'; attrs: { href: string; target?: string } }
export interface TextStyleMark {
  type: 'textStyle';
  attrs?: { color?: string; fontSize?: string; fontWeight?: string | number };
}
export interface ColorMark { type: 'color'; attrs?: { color?: string } }

export type Mark = BoldMark | ItalicMark | UnderlineMark | StrikeMark | CodeMark | LinkMark | TextStyleMark | ColorMark;
export type MarkType = Mark['type'];

export interface TextNode { type: 'text'; text: string; marks?: Mark[] }
export interface HardBreakNode { type: 'hardBreak' }
/** Rendered as `{{id}}` / `{{id,fallback=...}}` and filled in at send time. */
export interface VariableNode { type: 'variable'; attrs: { id: string; fallback?: string } }

export type InlineNode = TextNode | HardBreakNode | VariableNode;

export interface ParagraphNode { type: 'paragraph'; attrs?: { textAlign?: TextAlign }; content?: InlineNode[] }
export interface HeadingNode { type: 'heading'; attrs: { level: 1 | 2 | 3; textAlign?: TextAlign }; content?: InlineNode[] }
export interface BulletListNode { type: 'bulletList'; content: ListItemNode[] }
export interface OrderedListNode { type: 'orderedList'; attrs?: { start?: number }; content: ListItemNode[] }
export interface ListItemNode { type: 'listItem'; content: BlockNode[] }
export interface BlockquoteNode { type: 'blockquote'; content: BlockNode[] }
export interface CodeBlockNode { type: 'codeBlock'; attrs?: { language?: string }; content?: TextNode[] }
export interface HorizontalRuleNode { type: 'horizontalRule' }
export interface ButtonNode {
  type: 'button';
  attrs: {
    text: string;
    url: string;
    alignment?: Alignment;
    /** Pixels: 6, "6" or "6px". */
    borderRadius?: number | string;
    buttonColor?: string;
    textColor?: string;
    borderColor?: string;
    borderWidth?: number | string;
  };
}
export interface ImageNode {
  type: 'image';
  attrs: {
    src: string;
    alt?: string;
    title?: string;
    /** Pixels (number or "600"/"600px"), a percentage ("50%") or "auto". */
    width?: number | string;
    height?: number | string;
    alignment?: Alignment;
    /** Wraps the image in a link. */
    externalLink?: string;
    borderRadius?: number | string;
    borderWidth?: number | string;
    borderColor?: string;
  };
}
export interface SpacerNode { type: 'spacer'; attrs?: { height?: SpacerSize | number | string } }
export interface LogoNode {
  type: 'logo';
  attrs: { src: string; alt?: string; title?: string; size?: LogoSize | number | string; alignment?: Alignment };
}
export interface UnsubscribeFooterNode { type: 'unsubscribeFooter'; content?: InlineNode[] }

export type BlockNode =
  | ParagraphNode
  | HeadingNode
  | BulletListNode
  | OrderedListNode
  | BlockquoteNode
  | CodeBlockNode
  | HorizontalRuleNode
  | ButtonNode
  | ImageNode
  | SpacerNode
  | LogoNode
  | UnsubscribeFooterNode;

export type EditorNode = BlockNode | InlineNode | ListItemNode;

export interface EditorDoc { type: 'doc'; content: BlockNode[] }

/** What a new template or campaign starts with. Frozen: copy before editing. */
export const EMPTY_DOCUMENT: EditorDoc = Object.freeze({
  type: 'doc',
  content: Object.freeze([]) as unknown as BlockNode[],
}) as EditorDoc;

// ---------------------------------------------------------------------------
// Parsing and validation

/** Deeper documents are not something an editor produces; refusing them keeps recursion bounded. */
const MAX_DEPTH = 64;

const INLINE_TYPES = new Set(['text', 'hardBreak', 'variable']);
const BLOCK_TYPES = new Set([
  'paragraph',
  'heading',
  'bulletList',
  'orderedList',
  'blockquote',
  'codeBlock',
  'horizontalRule',
  'button',
  'image',
  'spacer',
  'logo',
  'unsubscribeFooter',
]);
const KNOWN_MARKS = new Set(['bold', 'italic', 'underline', 'strike', 'code', 'link', 'textStyle', 'color']);
const TEXT_ALIGNS = new Set(['left', 'center', 'right', 'justify']);
const ALIGNMENTS = new Set(['left', 'center', 'right']);
const SPACER_SIZES = new Set(['sm', 'md', 'lg', 'xl']);
const LOGO_SIZES = new Set(['sm', 'md', 'lg']);
const PIXEL_STRING = /^\d{1,5}(?:\.\d{1,3})?(?:px)?$/;

type Json = Record<string, unknown>;
type ContentKind = 'block' | 'inline' | 'listItem' | 'text';

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value);
  if (typeof value === 'object') return 'an object';
  return String(value);
}

/** Reads attributes with typed accessors that throw a RenderError naming the attribute. */
class Attrs {
  private readonly raw: Json;

  constructor(
    node: Json,
    private readonly nodeType: string,
    private readonly path: string,
  ) {
    const attrs = node.attrs;
    if (attrs !== undefined && attrs !== null && !isObject(attrs)) {
      throw new RenderError(`${nodeType} attrs must be an object, got ${describe(attrs)} at ${path}.attrs`, `${path}.attrs`);
    }
    this.raw = (attrs as Json | undefined) ?? {};
  }

  private fail(name: string, expected: string): never {
    const path = `${this.path}.attrs.${name}`;
    throw new RenderError(
      `invalid ${this.nodeType} attribute "${name}": expected ${expected}, got ${describe(this.raw[name])} at ${path}`,
      path,
    );
  }

  /** null and undefined both mean "not set": ProseMirror serialises unset attrs as null. */
  private get(name: string): unknown {
    const value = this.raw[name];
    return value === null ? undefined : value;
  }

  string(name: string): string | undefined {
    const value = this.get(name);
    if (value === undefined) return undefined;
    if (typeof value !== 'string') this.fail(name, 'a string');
    return value;
  }

  oneOf<T extends string>(name: string, allowed: Set<string>): T | undefined {
    const value = this.get(name);
    if (value === undefined) return undefined;
    if (typeof value !== 'string' || !allowed.has(value)) this.fail(name, `one of ${[...allowed].join(', ')}`);
    return value as T;
  }

  /** A pixel length as number or "12"/"12px" string, kept as given. */
  pixels(name: string, extra?: (value: string) => boolean): number | string | undefined {
    const value = this.get(name);
    if (value === undefined) return undefined;
    if (typeof value === 'number' && Number.isFinite(value) && value >= 0) return value;
    if (typeof value === 'string' && (PIXEL_STRING.test(value.trim()) || extra?.(value.trim()))) return value;
    return this.fail(name, 'a non-negative number of pixels');
  }

  integer(name: string, min: number, max: number): number | undefined {
    const value = this.get(name);
    if (value === undefined) return undefined;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      this.fail(name, `an integer from ${min} to ${max}`);
    }
    return value;
  }

  /** Raw value, for attributes with bespoke rules. */
  value(name: string): unknown {
    return this.get(name);
  }
}

/** Copies only the defined entries, so parsed documents carry no null/undefined noise. */
function defined<T extends object>(obj: T): T {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(obj)) {
    if (value !== undefined) out[key] = value;
  }
  return out as T;
}

function optionalAttrs<T extends object>(obj: T): { attrs?: T } {
  const attrs = defined(obj);
  return Object.keys(attrs).length > 0 ? { attrs } : {};
}

function parseMarks(raw: unknown, path: string): Mark[] | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (!Array.isArray(raw)) throw new RenderError(`marks must be an array at ${path}`, path);
  const marks: Mark[] = raw.map((m, i) => parseMark(m, `${path}[${i}]`));
  return marks.length > 0 ? marks : undefined;
}

function parseMark(raw: unknown, path: string): Mark {
  if (!isObject(raw) || typeof raw.type !== 'string') {
    throw new RenderError(`mark must be an object with a string "type" at ${path}`, path);
  }
  const type = raw.type;
  if (!KNOWN_MARKS.has(type)) throw new RenderError(`unknown mark type ${JSON.stringify(type)} at ${path}`, path);
  const attrs = new Attrs(raw, `${type} mark`, path);
  switch (type) {
    case 'link':
      // A link without href is kept (it renders as plain text) rather than
      // failing a whole campaign over an editor glitch.
      return { type, attrs: defined({ href: attrs.string('href') ?? '', target: attrs.string('target') }) };
    case 'textStyle': {
      const fontWeight = attrs.value('fontWeight');
      if (fontWeight !== undefined && typeof fontWeight !== 'string' && typeof fontWeight !== 'number') {
        attrs.string('fontWeight'); // throws with the standard message
      }
      return {
        type,
        ...optionalAttrs({
          color: attrs.string('color'),
          fontSize: attrs.string('fontSize'),
          fontWeight: fontWeight as string | number | undefined,
        }),
      };
    }
    case 'color':
      return { type, ...optionalAttrs({ color: attrs.string('color') }) };
    default:
      return { type } as Mark;
  }
}

class DocumentParser {
  parseRoot(raw: unknown): EditorDoc {
    if (!isObject(raw)) {
      throw new RenderError(`the document root must be an object with type "doc", got ${describe(raw)}`, '');
    }
    if (raw.type !== 'doc') {
      throw new RenderError(`the document root must have type "doc", got ${describe(raw.type)}`, '');
    }
    return { type: 'doc', content: this.children(raw, 'doc', '', 'block', 0) as BlockNode[] };
  }

  private children(node: Json, nodeType: string, path: string, kind: ContentKind, depth: number): EditorNode[] {
    const raw = node.content;
    if (raw === undefined || raw === null) return [];
    const contentPath = path === '' ? 'content' : `${path}.content`;
    if (!Array.isArray(raw)) {
      throw new RenderError(`${nodeType} content must be an array, got ${describe(raw)} at ${contentPath}`, contentPath);
    }
    return raw.map((child, i) => this.node(child, `${contentPath}[${i}]`, nodeType, kind, depth + 1));
  }

  private noChildren(node: Json, nodeType: string, path: string): void {
    const raw = node.content;
    if (raw === undefined || raw === null || (Array.isArray(raw) && raw.length === 0)) return;
    throw new RenderError(`${nodeType} cannot have content at ${path}.content`, `${path}.content`);
  }

  private node(raw: unknown, path: string, parentType: string, kind: ContentKind, depth: number): EditorNode {
    if (depth > MAX_DEPTH) throw new RenderError(`document is nested too deeply (more than ${MAX_DEPTH} levels) at ${path}`, path);
    if (!isObject(raw) || typeof raw.type !== 'string') {
      throw new RenderError(`node must be an object with a string "type" at ${path}`, path);
    }
    const type = raw.type;
    if (!INLINE_TYPES.has(type) && !BLOCK_TYPES.has(type) && type !== 'listItem') {
      throw new RenderError(`unknown node type ${JSON.stringify(type)} at ${path}`, path);
    }
    const allowed =
      kind === 'block'
        ? BLOCK_TYPES.has(type)
        : kind === 'inline'
          ? INLINE_TYPES.has(type)
          : kind === 'listItem'
            ? type === 'listItem'
            : type === 'text';
    if (!allowed) {
      throw new RenderError(`node type ${JSON.stringify(type)} is not allowed inside ${parentType} at ${path}`, path);
    }
    return this.typed(type, raw, path, depth);
  }

  private typed(type: string, raw: Json, path: string, depth: number): EditorNode {
    const a = new Attrs(raw, type, path);
    switch (type) {
      case 'text': {
        if (typeof raw.text !== 'string') {
          throw new RenderError(`text node must have a string "text", got ${describe(raw.text)} at ${path}.text`, `${path}.text`);
        }
        const marks = parseMarks(raw.marks, `${path}.marks`);
        return marks ? { type, text: raw.text, marks } : { type, text: raw.text };
      }
      case 'hardBreak':
      case 'horizontalRule':
        this.noChildren(raw, type, path);
        return { type };
      case 'variable': {
        this.noChildren(raw, type, path);
        // useSend stores the name in `id` (and sometimes also `name`).
        const id = a.string('id') ?? a.string('name');
        if (id === undefined || !VARIABLE_NAME_PATTERN.test(id)) {
          const where = `${path}.attrs.id`;
          throw new RenderError(
            `invalid variable attribute "id": expected a name made of letters, digits, "_" and ".", got ${describe(id ?? null)} at ${where}`,
            where,
          );
        }
        const fallback = a.string('fallback');
        if (fallback !== undefined && (fallback.includes('}}') || fallback.includes('{{'))) {
          const where = `${path}.attrs.fallback`;
          throw new RenderError(`invalid variable attribute "fallback": it cannot contain "{{" or "}}" at ${where}`, where);
        }
        return { type, attrs: defined({ id, fallback: fallback === '' ? undefined : fallback }) };
      }
      case 'paragraph':
        return {
          type,
          ...optionalAttrs({ textAlign: a.oneOf<TextAlign>('textAlign', TEXT_ALIGNS) }),
          ...this.optionalContent(raw, type, path, 'inline', depth),
        } as ParagraphNode;
      case 'heading': {
        const level = a.value('level') === undefined ? 1 : a.integer('level', 1, 3);
        return {
          type,
          attrs: defined({ level: level as 1 | 2 | 3, textAlign: a.oneOf<TextAlign>('textAlign', TEXT_ALIGNS) }),
          ...this.optionalContent(raw, type, path, 'inline', depth),
        } as HeadingNode;
      }
      case 'bulletList':
        return { type, content: this.children(raw, type, path, 'listItem', depth) as ListItemNode[] };
      case 'orderedList':
        return {
          type,
          ...optionalAttrs({ start: a.integer('start', 0, 1_000_000) }),
          content: this.children(raw, type, path, 'listItem', depth) as ListItemNode[],
        };
      case 'listItem':
        return { type, content: this.children(raw, type, path, 'block', depth) as BlockNode[] };
      case 'blockquote':
        return { type, content: this.children(raw, type, path, 'block', depth) as BlockNode[] };
      case 'codeBlock':
        return {
          type,
          ...optionalAttrs({ language: a.string('language') }),
          ...this.optionalContent(raw, type, path, 'text', depth),
        } as CodeBlockNode;
      case 'button':
        this.noChildren(raw, type, path);
        return {
          type,
          attrs: defined({
            text: a.string('text') ?? '',
            url: a.string('url') ?? '',
            alignment: this.alignment(a),
            borderRadius: a.pixels('borderRadius'),
            buttonColor: a.string('buttonColor'),
            textColor: a.string('textColor'),
            borderColor: a.string('borderColor'),
            borderWidth: a.pixels('borderWidth'),
          }),
        };
      case 'image': {
        this.noChildren(raw, type, path);
        const isSize = (v: string) => /^(?:auto|\d{1,3}(?:\.\d{1,2})?%)$/.test(v);
        return {
          type,
          attrs: defined({
            src: a.string('src') ?? '',
            alt: a.string('alt'),
            title: a.string('title'),
            width: a.pixels('width', isSize),
            height: a.pixels('height', isSize),
            alignment: this.alignment(a),
            externalLink: a.string('externalLink') || undefined,
            borderRadius: a.pixels('borderRadius'),
            borderWidth: a.pixels('borderWidth'),
            borderColor: a.string('borderColor'),
          }),
        };
      }
      case 'spacer': {
        this.noChildren(raw, type, path);
        return { type, ...optionalAttrs({ height: a.pixels('height', (v) => SPACER_SIZES.has(v)) }) } as SpacerNode;
      }
      case 'logo':
        this.noChildren(raw, type, path);
        return {
          type,
          attrs: defined({
            src: a.string('src') ?? '',
            alt: a.string('alt'),
            title: a.string('title'),
            size: a.pixels('size', (v) => LOGO_SIZES.has(v)),
            alignment: this.alignment(a),
          }),
        } as LogoNode;
      case 'unsubscribeFooter':
        return { type, ...this.optionalContent(raw, type, path, 'inline', depth) } as UnsubscribeFooterNode;
      default:
        // Unreachable: node() rejects unknown types first.
        throw new RenderError(`unknown node type ${JSON.stringify(type)} at ${path}`, path);
    }
  }

  private optionalContent(raw: Json, type: string, path: string, kind: ContentKind, depth: number): { content?: EditorNode[] } {
    const content = this.children(raw, type, path, kind, depth);
    return content.length > 0 ? { content } : {};
  }

  /** useSend's newer nodes store alignment as `textAlign`, older ones as `alignment`; textAlign wins, as there. */
  private alignment(a: Attrs): Alignment | undefined {
    return a.oneOf<Alignment>('textAlign', ALIGNMENTS) ?? a.oneOf<Alignment>('alignment', ALIGNMENTS);
  }
}

/**
 * Parses and validates stored editor content. Throws RenderError, whose
 * message and `path` name the offending node, mark or attribute.
 */
export function parseEditorDocument(json: string): EditorDoc {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch (err) {
    throw new RenderError(`content is not valid JSON: ${err instanceof Error ? err.message : String(err)}`, '');
  }
  return new DocumentParser().parseRoot(raw);
}

/** Validates an already-decoded document (e.g. one sent as a JSON object by the API). */
export function validateEditorDocument(value: unknown): EditorDoc {
  return new DocumentParser().parseRoot(value);
}
