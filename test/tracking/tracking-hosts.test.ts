import { request as httpRequest } from 'node:http';
import test from 'ava';
import { simpleParser } from 'mailparser';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { twoTeams } from '../helpers/two-teams.js';

// Which host may serve which tracked link, when the shared tracking host (POSTHORN_PUBLIC_URL)
// sits under a domain name that any team can add: another team naming that host as its own
// tracking domain must not take the shared host away from everyone else's links.

let w: MailWorld;

test.before(async () => {
  w = await startMailWorld({ overrides: { publicUrl: 'http://links.mailhost.dev' } });
  const patch = await w.t0.request('PATCH', `/v1/domains/${w.domain.id}`, { body: { openTracking: true, clickTracking: true } });
  if (patch.status !== 200) throw new Error(JSON.stringify(patch.body));
});
test.after.always(async () => {
  await w?.close();
});

async function deliver(html: string): Promise<{ id: string; html: string }> {
  const before = w.sink.messages.length;
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { html, subject: 'tracked' }) });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  const [msg] = (await w.sink.waitForMessages(before + 1)).slice(before);
  return { id: res.body.emailId, html: String((await simpleParser(msg!.raw)).html || '') };
}

function get(url: string): Promise<{ status: number; location: string | undefined }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: w.t0.app.listeners.http!.port, path: u.pathname, headers: { host: u.host } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode!, location: res.headers.location }));
    });
    req.on('error', reject);
    req.end();
  });
}

const statusesOf = async (id: string) => ((await w.t0.request('GET', `/v1/emails/${id}`)).body.emailEvents as { status: string }[]).map((e) => e.status);

test.serial('another team naming the shared tracking host as its tracking domain does not break the shared host for everyone else', async (t) => {
  const { id, html } = await deliver('<html><body><a href="https://example.com/read">Read</a></body></html>');
  const link = /href="([^"]*\/t\/c\/[^"]*)"/.exec(html)![1]!;
  const pixel = /<img src="([^"]*\/t\/o\/[^"]*)"/.exec(html)![1]!;
  t.regex(link, /^http:\/\/links\.mailhost\.dev\/t\/c\//);

  // Team B adds the shared host's parent domain (unverified: any team can add any name) and
  // names the shared host as its tracking domain; it is even "verified" if that host is a CNAME
  // to this server.
  const keyB = (await twoTeams(w.t0)).b.key;
  const domainB = await w.t0.request('POST', '/v1/domains', { key: keyB, body: { name: 'mailhost.dev', region: 'us-east-1' } });
  t.is(domainB.status, 200);
  const patched = await w.t0.request('PATCH', `/v1/domains/${domainB.body.id}`, { key: keyB, body: { trackingDomain: 'links', clickTracking: true } });
  t.is(patched.status, 200, JSON.stringify(patched.body));
  t.is(patched.body.trackingDomain, 'links.mailhost.dev');

  const clicked = await get(link);
  t.is(clicked.status, 302, 'team A’s link on the shared host still redirects');
  t.is(clicked.location, 'https://example.com/read');
  t.is((await get(pixel)).status, 200);
  const statuses = await statusesOf(id);
  t.true(statuses.includes('OPENED') && statuses.includes('CLICKED'), statuses.join());

  w.zone.set('links.mailhost.dev', 'CNAME', ['mx.posthorn.test']);
  await w.t0.request('PUT', `/v1/domains/${domainB.body.id}/verify`, { key: keyB });
  t.is((await w.t0.request('GET', `/v1/domains/${domainB.body.id}`, { key: keyB })).body.trackingDomainStatus, 'SUCCESS');
  const again = await get(link);
  t.is(again.status, 302, 'nor once its CNAME resolves');
  t.is(again.location, 'https://example.com/read');
});

test.serial('another team naming a team’s own tracking host as its tracking domain does not take it away', async (t) => {
  // Team C adds team A's domain name (any team may) and claims A's tracking host: A's claim
  // stands, and A's links on it still redirect.
  const keyC = (await twoTeams(w.t0, { b: { name: 'Team C' } })).b.key;
  const own = await w.t0.request('PATCH', `/v1/domains/${w.domain.id}`, { body: { trackingDomain: 'go' } });
  t.is(own.body.trackingDomain, `go.${w.domain.name}`);
  w.zone.set(`go.${w.domain.name}`, 'CNAME', ['mx.posthorn.test']);
  await w.t0.request('PUT', `/v1/domains/${w.domain.id}/verify`);
  t.is((await w.t0.request('GET', `/v1/domains/${w.domain.id}`)).body.trackingDomainStatus, 'SUCCESS');
  const { html } = await deliver('<html><body><a href="https://example.com/go">Go</a></body></html>');
  const link = /href="([^"]*\/t\/c\/[^"]*)"/.exec(html)![1]!;
  t.regex(link, new RegExp(`^http://go\\.${w.domain.name.replace(/\./g, '\\.')}/t/c/`));
  const domainC = await w.t0.request('POST', '/v1/domains', { key: keyC, body: { name: w.domain.name, region: 'us-east-1' } });
  t.is(domainC.status, 200);
  await w.t0.request('PATCH', `/v1/domains/${domainC.body.id}`, { key: keyC, body: { trackingDomain: 'go' } });
  const res = await get(link);
  t.is(res.status, 302);
  t.is(res.location, 'https://example.com/go');
});
