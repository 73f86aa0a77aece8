import test from 'ava';
import { parseMessage } from '../../src/smtp/parsed-mail.js';
import { parseReport } from '../../src/smtp/inbound/report-parser.js';
import { foldText } from '../../src/smtp/inbound/text-bounce-phrases.js';

// Plain-text bounces in German, French, Spanish, Portuguese, Italian and Dutch (text-bounce-phrases.ts):
// the bounce text makes the message a bounce, the reply's words say a dead mailbox (hard, as
// "user unknown") or a full one (soft, as "mailbox full"), and an auto-reply in the language never
// bounces. The codes alone (550, 552 without an enhanced code) would say neither.

function textMessage(subject: string, body: string[]): Buffer {
  return Buffer.from([`Subject: ${subject}`, 'MIME-Version: 1.0', 'Content-Type: text/plain; charset=utf-8', 'Content-Transfer-Encoding: 8bit', '', ...body, ''].join('\r\n'), 'utf8');
}

async function read(raw: Buffer) {
  return parseReport(raw, await parseMessage(raw), '');
}

interface Language {
  name: string;
  subject: string;
  intro: string;
  gone: string;
  full: string;
  autoSubject: string;
  autoText: string;
}

const LANGUAGES: Language[] = [
  {
    name: 'German',
    subject: 'Unzustellbar: Hello',
    intro: 'Ihre Nachricht konnte nicht\n zugestellt werden an:',
    gone: 'Benutzer unbekannt',
    full: 'Postfach ist voll',
    autoSubject: 'Automatische Antwort: Hello',
    autoText: 'Ich bin bis zum 3. März nicht im Büro und lese meine E-Mails nicht.',
  },
  {
    name: 'German, written without umlauts and in capitals',
    subject: 'NICHT ZUSTELLBAR: Hello',
    intro: 'Die Nachricht konnte nicht zugestellt werden.',
    gone: 'EMPFAENGER UNBEKANNT',
    full: 'Speicherplatz ueberschritten',
    autoSubject: 'Re: Hello',
    autoText: 'Ich bin AUSSER HAUS und ab Montag wieder erreichbar.',
  },
  {
    name: 'French',
    subject: 'Non remis : Hello',
    intro: "Votre message n’a pas pu être remis aux destinataires suivants :",
    gone: 'Utilisateur inconnu',
    full: 'Boîte aux lettres pleine',
    autoSubject: 'Réponse automatique : Hello',
    autoText: 'Je suis absent du bureau jusqu’au 3 mars.',
  },
  {
    name: 'French, without accents',
    subject: 'Echec de la remise du message',
    intro: 'Le message n\'a pas pu etre delivre.',
    gone: 'destinataire inconnu',
    full: 'quota depasse',
    autoSubject: 'Re: Hello',
    autoText: 'Je suis en congés jusqu\'au 3 mars.',
  },
  {
    name: 'Spanish',
    subject: 'No se puede entregar: Hello',
    intro: 'Su mensaje no se pudo entregar a los siguientes destinatarios:',
    gone: 'Usuario desconocido',
    full: 'BUZÓN LLENO',
    autoSubject: 'Respuesta automática: Hello',
    autoText: 'Estoy fuera de la oficina hasta el 3 de marzo.',
  },
  {
    name: 'Portuguese',
    subject: 'Não é possível entregar: Hello',
    intro: 'A sua mensagem não pôde ser entregue aos seguintes destinatários:',
    gone: 'Usuário desconhecido',
    full: 'Caixa postal cheia',
    autoSubject: 'Resposta automática: Hello',
    autoText: 'Estou de férias até 3 de março.',
  },
  {
    name: 'Italian',
    subject: 'Non recapitabile: Hello',
    intro: 'Non è stato possibile recapitare il messaggio ai seguenti destinatari:',
    gone: 'Utente sconosciuto',
    full: 'Casella piena',
    autoSubject: 'Risposta automatica: Hello',
    autoText: 'Sono fuori ufficio fino al 3 marzo.',
  },
  {
    name: 'Dutch',
    subject: 'Onbestelbaar: Hello',
    intro: 'Uw bericht kon niet worden afgeleverd bij de volgende ontvangers:',
    gone: 'Gebruiker onbekend',
    full: 'Mailbox is vol',
    autoSubject: 'Automatisch antwoord: Hello',
    autoText: 'Ik ben afwezig tot 3 maart.',
  },
];

const bounceBody = (l: Language) => [l.intro, '', '  alice@example.net', `    550 ${l.gone}`, '', '  bob@example.net', `    552 ${l.full}`, '', '  carol@example.net', `    452 ${l.full}`];

for (const l of LANGUAGES) {
  test(`${l.name}: a dead mailbox is a hard bounce, a full one a soft bounce (5yz) or a delay (4yz)`, async (t) => {
    const r = await read(textMessage(l.subject, bounceBody(l)));
    t.is(r.type, 'text');
    t.is(r.textBounce?.evidence, 'bounce-text');
    t.deepEqual(
      r.recipients.map((x) => [x.finalRecipient, x.action, x.smtpCode, x.hardBounce, x.category]),
      [
        ['alice@example.net', 'failed', 550, true, 'recipient'],
        ['bob@example.net', 'failed', 552, false, 'mailbox-full'],
        ['carol@example.net', 'delayed', 452, false, 'mailbox-full'],
      ],
    );
    // The diagnostic is the remote's own words, not the English gloss.
    t.is(r.recipients[0]!.diagnosticCode, `550 ${l.gone}`);
  });

  test(`${l.name}: the bounce text alone makes it a bounce (in the subject or the text), and only from the null reverse-path`, async (t) => {
    const blocks = bounceBody(l).slice(1);
    t.is((await read(textMessage(l.subject, ['Hello,', ...blocks]))).type, 'text', 'subject');
    t.is((await read(textMessage('Hello', [l.intro, ...blocks]))).type, 'text', 'text');
    t.is((await read(textMessage('Hello', ['Hello,', ...blocks]))).type, 'other', 'neither');
    const raw = textMessage(l.subject, bounceBody(l));
    t.is((await parseReport(raw, await parseMessage(raw), 'someone@example.org')).type, 'other');
  });

  test(`${l.name}: an auto-reply never bounces, even with the bounce text and codes next to the addresses`, async (t) => {
    t.is((await read(textMessage(l.autoSubject, [l.autoText, '', ...bounceBody(l)]))).type, 'other');
    t.is((await read(textMessage(l.subject, [l.autoText, '', ...bounceBody(l)]))).type, 'other', 'the auto-reply text alone');
    t.is((await read(textMessage(l.autoSubject, ['Hello,', ...bounceBody(l).slice(1)]))).type, 'other', 'the auto-reply subject alone');
  });
}

test('phrases match as whole words: "mailbox vol" is not "mailbox volume", "casella piena" not "casella pienamente"', async (t) => {
  const r = await read(textMessage('Onbestelbaar: Hello', ['Uw bericht kon niet worden afgeleverd.', '', '  bob@example.net', '    552 Mailbox volume exceeded for this account type']));
  t.like(r.recipients[0], { action: 'failed', category: 'other', hardBounce: false });
  const i = await read(textMessage('Non recapitabile: Hello', ['', '  bob@example.net', '    550 casella pienamente attiva']));
  t.like(i.recipients[0], { action: 'failed', category: 'other', hardBounce: false });
});

test('folding: case, accents, ß, typographic apostrophes and runs of white space', (t) => {
  t.is(foldText('BUZÓN  Lleno\r\n Boîte   AUX lettres Straße n’a'), "buzon lleno boite aux lettres strasse n'a");
});

test('large texts are read in linear time: runs of phrase beginnings and of accented letters', async (t) => {
  // The test's timeout is the check; each pattern is tried once per position.
  const runs = ['benutzer ', "n'a pas pu etre ", 'buzon ', 'e\u0301', 'ü', ' '].map((r) => r.repeat(Math.ceil(60_000 / r.length)));
  for (const run of runs) {
    const r = await read(textMessage(`Unzustellbar ${run.slice(0, 2000)}`, [run, '', '  alice@example.net', `    550 ${run} Benutzer unbekannt`]));
    t.is(r.type, 'text');
  }
});
