// The words of plain-text bounces and auto-replies in German, French, Spanish, Portuguese,
// Italian and Dutch, as MTAs and hosters localise them (Exchange's NDR subjects "Unzustellbar:",
// "Non remis :", "No se puede entregar:", "Não é possível entregar:", "Non recapitabile:",
// "Onbestelbaar:", and the prose of their mail systems). text-bounce.ts reads the English ones
// itself; these are matched on a folded copy of the text (lower case, accents and ß taken off,
// white space collapsed), so "BUZÓN LLENO", "buzon lleno" and "Buzón\n lleno" are one phrase.
// Every pattern is a plain alternation of literal phrases between word boundaries: each input
// position tries each phrase once, so the matching stays linear in the input.

/** A message that says it is a bounce (with the null reverse-path and a code next to an address). */
const BOUNCE = [
  // de
  'unzustellbar', 'nicht zustellbar', 'konnte nicht zugestellt werden', 'nicht zugestellt werden konnte', 'zustellung fehlgeschlagen',
  // fr
  'non remis', 'echec de la remise', "n'a pas pu etre remis", "n'a pas pu etre remise", "n'a pas pu etre delivre", "n'a pas pu etre distribue", 'impossible de remettre', 'non distribuable',
  // es
  'no se puede entregar', 'no se pudo entregar', 'no se ha podido entregar', 'no pudo ser entregado', 'no ha podido ser entregado', 'mensaje no entregado',
  // pt
  'nao e possivel entregar', 'nao foi possivel entregar', 'nao pode ser entregue', 'nao foi entregue', 'mensagem nao entregue', 'falha na entrega',
  // it
  'non recapitabile', 'impossibile recapitare', 'non e stato possibile recapitare', 'non e stato possibile consegnare', 'mancato recapito', 'messaggio non consegnato',
  // nl
  'onbestelbaar', 'kan niet worden bezorgd', 'kon niet worden bezorgd', 'kon niet worden afgeleverd', 'kan niet worden afgeleverd', 'niet afgeleverd',
];

/** Vacation and out-of-office notices: never a bounce, whatever else they say. */
const AUTO_REPLY = [
  // de ("Abwesenheit" is in text-bounce.ts's own list)
  'abwesend', 'automatische antwort', 'ausser haus', 'im urlaub', 'nicht im buro', 'nicht im buero',
  // fr ("absence" is in text-bounce.ts's own list)
  'reponse automatique', 'absent du bureau', 'absente du bureau', 'je suis absent', 'je suis absente', 'en conge', 'en conges', 'en vacances',
  // es
  'respuesta automatica', 'fuera de la oficina', 'fuera de oficina', 'de vacaciones', 'estoy ausente',
  // pt
  'resposta automatica', 'fora do escritorio', 'de ferias', 'estou ausente',
  // it
  'risposta automatica', 'fuori ufficio', 'fuori sede', 'in ferie', 'sono assente',
  // nl
  'automatisch antwoord', 'afwezig', 'afwezigheid', 'buiten kantoor', 'op vakantie',
];

/** The mailbox does not exist: read as "user unknown" (a hard bounce under a 5yz). */
const MAILBOX_GONE = [
  // de
  'benutzer unbekannt', 'unbekannter benutzer', 'empfanger unbekannt', 'empfaenger unbekannt', 'unbekannter empfanger', 'unbekannter empfaenger',
  'benutzer existiert nicht', 'postfach existiert nicht', 'postfach nicht vorhanden', 'mailbox existiert nicht', 'adresse existiert nicht', 'kein solcher benutzer',
  // fr
  'utilisateur inconnu', 'destinataire inconnu', 'adresse inconnue', 'utilisateur inexistant', 'adresse inexistante', 'compte inexistant',
  'boite aux lettres inexistante', 'boite aux lettres introuvable', "cette adresse n'existe pas", "l'utilisateur n'existe pas",
  // es
  'usuario desconocido', 'destinatario desconocido', 'direccion desconocida', 'usuario inexistente', 'buzon inexistente',
  'el usuario no existe', 'usuario no existe', 'el buzon no existe', 'buzon no existe', 'la cuenta no existe', 'la direccion no existe',
  // pt
  'usuario desconhecido', 'utilizador desconhecido', 'destinatario desconhecido', 'endereco desconhecido', 'usuario inexistente', 'utilizador inexistente',
  'conta inexistente', 'caixa postal inexistente', 'usuario nao existe', 'utilizador nao existe', 'endereco nao existe', 'conta nao existe',
  // it
  'utente sconosciuto', 'destinatario sconosciuto', 'indirizzo sconosciuto', 'utente inesistente', 'casella inesistente', 'indirizzo inesistente',
  "l'utente non esiste", 'utente non esiste', 'la casella non esiste', 'casella non esiste',
  // nl
  'gebruiker onbekend', 'onbekende gebruiker', 'ontvanger onbekend', 'onbekende ontvanger', 'adres onbekend', 'onbekend adres',
  'gebruiker bestaat niet', 'mailbox bestaat niet', 'postbus bestaat niet', 'adres bestaat niet',
];

/** The mailbox is full: read as "mailbox full" (a soft bounce under a 5yz, a delay under a 4yz). */
const MAILBOX_FULL = [
  // de
  'postfach voll', 'postfach ist voll', 'mailbox voll', 'mailbox ist voll', 'postfach uberfullt', 'postfach ueberfuellt',
  'quota uberschritten', 'quota ueberschritten', 'speicherplatz uberschritten', 'speicherplatz ueberschritten', 'speicherplatz erschopft', 'speicherplatz erschoepft',
  // fr
  'boite aux lettres pleine', 'boite aux lettres saturee', 'boite de reception pleine', 'boite pleine', 'quota depasse', 'depassement de quota',
  // es
  'buzon lleno', 'buzon esta lleno', 'buzon de correo lleno', 'cuota excedida', 'cuota superada', 'buzon excede',
  // pt
  'caixa postal cheia', 'caixa de correio cheia', 'caixa de entrada cheia', 'caixa postal lotada', 'cota excedida', 'quota excedida',
  // it
  'casella piena', 'casella di posta piena', 'casella postale piena', 'quota superata', 'quota esaurita', 'spazio esaurito',
  // nl
  'mailbox vol', 'mailbox is vol', 'postbus vol', 'postbus is vol', 'quotum overschreden', 'quota overschreden',
];

/** One pattern of literal phrases; each matches only as whole words. */
function phrases(list: readonly string[]): RegExp {
  const escaped = list.map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(`\\b(?:${escaped.join('|')})\\b`);
}

const BOUNCE_PHRASE = phrases(BOUNCE);
const AUTO_REPLY_PHRASE = phrases(AUTO_REPLY);
const MAILBOX_GONE_PHRASE = phrases(MAILBOX_GONE);
const MAILBOX_FULL_PHRASE = phrases(MAILBOX_FULL);

/**
 * The text as the phrases are written: lower case, accents off (NFD, then the combining marks
 * dropped), ß as ss, typographic apostrophes as ', every run of white space one space.
 */
export function foldText(text: string): string {
  return text
    .normalize('NFD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/ß/g, 'ss')
    .replace(/[\u2019\u2018`´]/g, "'")
    .replace(/\s+/g, ' ');
}

/** Whether folded text says it is a bounce, in one of these languages. */
export const isForeignBounceText = (folded: string): boolean => BOUNCE_PHRASE.test(folded);

/** Whether folded text is a vacation or out-of-office notice, in one of these languages. */
export const isForeignAutoReplyText = (folded: string): boolean => AUTO_REPLY_PHRASE.test(folded);

/**
 * The English words for what a reply says in another language ("user unknown", "mailbox full"),
 * for the reply classifier, which reads English; '' when it says neither. Both may be given: the
 * classifier's own order decides between them as it does for an English reply.
 */
export function englishGloss(text: string): string {
  const folded = foldText(text);
  const words: string[] = [];
  if (MAILBOX_FULL_PHRASE.test(folded)) words.push('mailbox full');
  if (MAILBOX_GONE_PHRASE.test(folded)) words.push('user unknown');
  return words.join('; ');
}
