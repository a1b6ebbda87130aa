/**
 * The public verification page of a PASS: one self-contained HTML document, no script, no
 * external resource. Everything a registry holds is user input, so every value goes through the
 * `html` template tag, which escapes whatever it is not told is markup.
 */
import crypto from 'node:crypto';
import type { AnchorView } from '../anchor/leaves.js';
import { isHttpUrl } from './metadata.js';
import type { MetadataItem } from './schema.js';
import type { PassView } from './service.js';

/** Markup that is already safe; anything else interpolated into `html` is escaped. */
class Markup {
  constructor(readonly text: string) {}
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

type Value = Markup | string | number | null | undefined | false | Value[];

function render(value: Value): string {
  if (value instanceof Markup) return value.text;
  if (Array.isArray(value)) return value.map(render).join('');
  if (value === null || value === undefined || value === false) return '';
  return escapeHtml(String(value));
}

function html(strings: TemplateStringsArray, ...values: Value[]): Markup {
  let out = strings[0] ?? '';
  values.forEach((value, i) => {
    out += render(value) + (strings[i + 1] ?? '');
  });
  return new Markup(out);
}

const STYLE = `
:root{color-scheme:light dark;--fg:#1d2430;--muted:#5b6575;--bg:#f3f5f8;--card:#fff;--line:#dde2ea;
--ok:#176b3a;--ok-bg:#e3f4e9;--bad:#a11b1b;--bad-bg:#fbe4e4}
@media (prefers-color-scheme:dark){:root{--fg:#e6e9ef;--muted:#9aa4b5;--bg:#14171c;--card:#1d2128;
--line:#323843;--ok:#7ad39b;--ok-bg:#173324;--bad:#ff9c9c;--bad-bg:#3c1b1b}}
*{box-sizing:border-box}
body{margin:0;padding:2rem 1rem;background:var(--bg);color:var(--fg);
font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:40rem;margin:0 auto;background:var(--card);border:1px solid var(--line);border-radius:12px;
padding:1.5rem 1.75rem}
.kicker{margin:0;color:var(--muted);font-size:.85rem;text-transform:uppercase;letter-spacing:.08em}
h1{margin:.25rem 0 .5rem;font-size:1.6rem;line-height:1.25;overflow-wrap:anywhere}
h2{font-size:1rem;margin:1.5rem 0 .5rem}
.status{display:inline-block;margin:.5rem 0;padding:.35rem .8rem;border-radius:999px;font-weight:700}
.status.valid{color:var(--ok);background:var(--ok-bg)}
.status.revoked{color:var(--bad);background:var(--bad-bg);font-size:1.15rem}
main.revoked{border:2px solid var(--bad)}
dl{display:grid;grid-template-columns:minmax(7rem,max-content) 1fr;gap:.4rem 1rem;margin:0}
dt{color:var(--muted)}
dd{margin:0;overflow-wrap:anywhere}
code{font:.9em ui-monospace,SFMono-Regular,Menlo,monospace}
.key{color:var(--muted);font-size:.85em}
.note{color:var(--muted)}
footer{max-width:40rem;margin:1rem auto 0;color:var(--muted);font-size:.8rem;text-align:center}
a{color:inherit}
`;

/**
 * The page's Content-Security-Policy: nothing may load or run; the one `<style>` element is
 * allowed by its hash rather than by 'unsafe-inline', so injected markup could not style either.
 */
export const PASS_PAGE_CSP = [
  "default-src 'none'",
  `style-src 'sha256-${crypto.createHash('sha256').update(STYLE).digest('base64')}'`,
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** `2026-11-21 20:18:01 UTC`: the same for every reader, whatever their locale. */
function formatTime(iso: string): Markup {
  return html`<time datetime="${iso}">${iso.slice(0, 19).replace('T', ' ')} UTC</time>`;
}

/** Only http(s) becomes a link; anything else (a data: URI above all) stays text. */
function linkOrText(value: string): Markup {
  if (isHttpUrl(value)) return html`<a href="${value}" rel="noopener noreferrer nofollow">${value}</a>`;
  if (value.startsWith('data:')) {
    // A data: URI can be a megabyte of base64: say what it is instead of printing it.
    const mediaType = /^data:([^;,]*)/.exec(value)?.[1] || 'text/plain';
    return html`<span class="note">embedded file (${mediaType}, ${value.length.toLocaleString('en')} characters)</span>`;
  }
  return html`${value}`;
}

function metadataValue(item: MetadataItem): Markup {
  const parts: Markup[] = [];
  if (item.value !== undefined)
    parts.push(item.type === 'URL' || item.type === 'FILE' ? linkOrText(item.value) : html`${item.value}`);
  if (item.file !== undefined) parts.push(linkOrText(item.file));
  return html`${parts.map((p, i) => (i === 0 ? p : html`<br>${p}`))}`;
}

function anchoring(anchor: AnchorView | null): Markup {
  if (anchor === null) return html`Not anchored`;
  if (anchor.status === 'pending')
    return html`Pending${anchor.network ? html` on ${anchor.network}` : ''}: waiting for the next batch`;
  return html`Anchored on ${anchor.network ?? 'an unknown network'}${
    anchor.anchored_at ? html` at ${formatTime(anchor.anchored_at)}` : ''
  }<br><span class="key">transaction</span> <code>${anchor.txId}</code>${
    anchor.blockNumber !== null ? html`<br><span class="key">block</span> ${anchor.blockNumber}` : ''
  }${anchor.root ? html`<br><span class="key">Merkle root</span> <code>${anchor.root}</code>` : ''}`;
}

function details(pass: PassView): Markup {
  if (pass.metadata === null)
    return html`<p class="note">The details of this pass are encrypted; only its issuer can read them.</p>`;
  if (pass.metadata.length === 0) return html``;
  return html`<h2>Details</h2><dl>${pass.metadata.map(
    (item) =>
      html`<dt>${item.title ?? item.key}${
        item.title !== undefined ? html` <span class="key">(${item.key})</span>` : ''
      }</dt><dd>${metadataValue(item)}</dd>`,
  )}</dl>`;
}

function htmlDocument(title: string, body: Markup): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>${title}</title>
<style>${new Markup(STYLE)}</style>
</head>
<body>
${body}
</body>
</html>
`.text;
}

/** The page of a PASS, revoked or valid, as `GET /pass/{id}` serves it to people. */
export function renderPassPage(pass: PassView): string {
  const status =
    pass.status === 'revoked'
      ? html`<p class="status revoked" id="status">Revoked${
          pass.revoked_at ? html` on ${formatTime(pass.revoked_at)}` : ''
        }</p>
<p class="note">Its issuer revoked this pass: it is no longer valid.</p>`
      : html`<p class="status valid" id="status">Valid</p>`;
  return htmlDocument(
    `${pass.title} · pass ${pass.status}`,
    html`<main class="${pass.status}">
<p class="kicker">Pass verification</p>
<h1 id="title">${pass.title}</h1>
${status}
${pass.description ? html`<p id="description">${pass.description}</p>` : ''}
<dl>
<dt>Issued by</dt><dd id="issuer">${pass.issuer}</dd>
<dt>Created</dt><dd>${formatTime(pass.created_at)}</dd>
<dt>Pass id</dt><dd><code>${pass.id}</code></dd>
<dt>Anchoring</dt><dd id="anchor">${anchoring(pass.anchor)}</dd>
</dl>
<section id="details">${details(pass)}</section>
</main>
<footer>Checked against the issuer’s Ledgerhook service when this page was loaded.</footer>`,
  );
}

/** What a person sees for an id that is not a PASS (the same for every such id). */
export function renderPassNotFound(): string {
  return htmlDocument(
    'Pass not found',
    html`<main>
<p class="kicker">Pass verification</p>
<h1>Pass not found</h1>
<p class="note">No pass has this address. Check that the link is complete.</p>
</main>`,
  );
}
