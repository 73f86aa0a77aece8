import type { TimeSeriesPoint } from '../core/analytics/analytics-service.js';
import { html, trustedHtml, type SafeHtml } from './html.js';
import { table } from './layout.js';

// Charts are SVG written on the server: no chart library, no script, and they print. Numbers
// are ours (counts and dates), never user text; colours come from the stylesheet's classes.

const SERIES = ['sent', 'delivered', 'bounced', 'complained', 'opened', 'clicked'] as const;
type SeriesKey = (typeof SERIES)[number];

const W = 640;
const H = 220;
const PAD = { left: 44, right: 24, top: 12, bottom: 28 };

/** 1, 2, 5 x 10^n at or above `max`, so gridlines land on round numbers. */
function niceMax(max: number): number {
  if (max <= 4) return 4;
  const p = 10 ** Math.floor(Math.log10(max));
  return ([1, 2, 5, 10].map((m) => m * p).find((v) => v >= max) ?? 10 * p);
}

export function timeSeriesChart(title: string, points: TimeSeriesPoint[], keys: readonly SeriesKey[] = ['sent', 'delivered', 'bounced', 'complained']): SafeHtml {
  const top = niceMax(Math.max(0, ...points.flatMap((p) => keys.map((k) => p[k]))));
  const x = (i: number) => PAD.left + (points.length === 1 ? 0 : (i * (W - PAD.left - PAD.right)) / (points.length - 1));
  const y = (v: number) => PAD.top + (H - PAD.top - PAD.bottom) * (1 - v / top);
  const grid = [0, 0.25, 0.5, 0.75, 1]
    .map((f) => {
      const v = Math.round(top * f);
      return `<line class="grid" x1="${PAD.left}" x2="${W - PAD.right}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}"/><text class="axis" x="${PAD.left - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${v}</text>`;
    })
    .join('');
  const every = Math.max(1, Math.ceil(points.length / 7));
  const labels = points
    .map((p, i) => (i % every === 0 || i === points.length - 1 ? `<text class="axis" x="${x(i).toFixed(1)}" y="${H - 8}" text-anchor="middle">${p.date.slice(5)}</text>` : ''))
    .join('');
  const lines = keys
    .map((k) => {
      const pts = points.map((p, i) => `${x(i).toFixed(1)},${y(p[k]).toFixed(1)}`).join(' ');
      const dots = points.map((p, i) => `<circle class="dot s-${k}" cx="${x(i).toFixed(1)}" cy="${y(p[k]).toFixed(1)}" r="2.5"/>`).join('');
      return `<polyline class="line s-${k}" points="${pts}"/>${dots}`;
    })
    .join('');
  const totals = keys.map((k) => `${points.reduce((a, p) => a + p[k], 0)} ${k}`).join(', ');
  const svg = trustedHtml(`<svg class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="${title}: ${totals}" focusable="false">${grid}${labels}${lines}</svg>`);
  return html`<figure class="chart-box">${svg}<figcaption><ul class="legend">${keys.map((k) => html`<li><span class="swatch s-${k}" aria-hidden="true"></span>${k} <strong>${points.reduce((a, p) => a + p[k], 0)}</strong></li>`)}</ul>
<details><summary>${title} as a table</summary>${table(title, ['Date', ...keys], points.map((p) => [p.date, ...keys.map((k) => String(p[k]))]))}</details></figcaption></figure>`;
}

/**
 * A rate on a scale with the thresholds marked: the bar is the value, the lines are the
 * limits. `scaleMax` is the right end of the scale (a little past the last threshold).
 */
export function rateGauge(label: string, ratePercent: number, thresholds: { value: number; label: string }[], scaleMax: number): SafeHtml {
  const w = 320;
  const h = 44;
  const sx = (v: number) => Math.min(w, (Math.max(0, v) / scaleMax) * w);
  const level = thresholds.filter((t) => ratePercent >= t.value).length;
  const tone = level === 0 ? 'good' : level === 1 ? 'warn' : 'bad';
  const marks = thresholds
    .map((t) => `<line class="threshold" x1="${sx(t.value).toFixed(1)}" x2="${sx(t.value).toFixed(1)}" y1="2" y2="26"/><text class="axis" x="${sx(t.value).toFixed(1)}" y="40" text-anchor="middle">${t.value}%</text>`)
    .join('');
  const svg = trustedHtml(
    `<svg class="gauge" viewBox="0 0 ${w} ${h}" role="img" aria-label="${label}: ${ratePercent}%, limits ${thresholds.map((t) => `${t.value}%`).join(' and ')}" focusable="false"><rect class="track" x="0" y="6" width="${w}" height="16" rx="4"/><rect class="fill ${tone}" x="0" y="6" width="${sx(ratePercent).toFixed(1)}" height="16" rx="4"/>${marks}</svg>`,
  );
  return html`<div class="gauge-box"><p class="gauge-value"><strong class="tone-${tone}">${ratePercent}%</strong> ${label}</p>${svg}<p class="hint">${thresholds.map((t) => `${t.value}%: ${t.label}`).join(' · ')}</p></div>`;
}
