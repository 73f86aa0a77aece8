import addressparser from 'nodemailer/lib/addressparser';
import { badRequest } from '../errors.js';

export interface Mailbox {
  name: string;
  /** Local part as given, domain lowercased. */
  address: string;
}

// Pragmatic RFC 5321 mailbox check: a dot-atom or quoted local part, and a domain of
// LDH labels (or an IDN already in A-labels / Unicode letters).
const LOCAL = /^(?:[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*|"(?:[^"\\\r\n]|\\.)+")$/;
const DOMAIN_LABEL = /^(?!-)[\p{L}\p{N}-]{1,63}(?<!-)$/u;

export function isValidAddress(address: string): boolean {
  if (address.length > 254) return false;
  const at = address.lastIndexOf('@');
  if (at < 1) return false;
  const local = address.slice(0, at);
  const domain = address.slice(at + 1);
  if (local.length > 64 || !LOCAL.test(local)) return false;
  const labels = domain.split('.');
  return labels.length >= 2 && labels.every((l) => DOMAIN_LABEL.test(l)) && !/^\d+$/.test(labels[labels.length - 1]!);
}

/** Lowercases the domain; local parts are case-sensitive in theory (RFC 5321 2.4) but we keep them as given. */
export function normalizeAddress(address: string): string {
  const at = address.lastIndexOf('@');
  return `${address.slice(0, at)}@${address.slice(at + 1).toLowerCase()}`;
}

/** Key used for suppression and contact matching: trimmed and fully lowercased. */
export function addressKey(address: string): string {
  return address.trim().toLowerCase();
}

export function domainOf(address: string): string {
  return address.slice(address.lastIndexOf('@') + 1).toLowerCase();
}

/** Parses one mailbox such as `Acme <hi@acme.com>` or `hi@acme.com`; 400 naming the field otherwise. */
export function parseMailbox(input: string, field: string): Mailbox {
  if (/[\r\n]/.test(input)) throw badRequest(`${field}: must not contain line breaks`);
  const parsed = addressparser(input, { flatten: true });
  if (parsed.length !== 1 || !parsed[0]!.address) throw badRequest(`${field}: "${input}" is not a single valid email address`);
  const { name, address } = parsed[0] as { name: string; address: string };
  if (!isValidAddress(address)) throw badRequest(`${field}: "${address}" is not a valid email address`);
  return { name, address: normalizeAddress(address) };
}

/** A string or array of addresses (each may carry a display name) to a list of mailboxes. */
export function parseMailboxList(input: string | string[] | null | undefined, field: string): Mailbox[] {
  if (input === undefined || input === null) return [];
  const list = Array.isArray(input) ? input : [input];
  return list.map((item, i) => parseMailbox(item, Array.isArray(input) ? `${field}[${i}]` : field));
}

/** Formats a mailbox for a header; nodemailer encodes the display name. */
export function formatMailbox(m: Mailbox): string {
  if (!m.name) return m.address;
  // RFC 5322 3.2.5: a phrase of atext words needs no quotes; anything else is quoted.
  const plain = /^[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~ ]+$/.test(m.name) && !/^ | $|  /.test(m.name);
  return plain ? `${m.name} <${m.address}>` : `"${m.name.replace(/["\\]/g, '\\$&')}" <${m.address}>`;
}
