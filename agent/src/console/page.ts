// The console's one document: HTML with its stylesheet and script inline (no framework, no CDN, nothing fetched but
// the console's own JSON: it works air-gapped). It holds no fleet data: the script reads /api/… with the token kept
// in sessionStorage, so the same document serves as the sign-in page when the document request carried no token.
import type { MetricsAccess } from '@skr-watcher/kube';

const STYLE = `
:root{--bg:#f6f7f9;--fg:#1d2330;--muted:#5d6677;--line:#d9dde4;--ok:#1b7f3b;--warn:#a05a00;--err:#b3261e;--busy:#245fb8}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;background:var(--bg);color:var(--fg)}
header{display:flex;gap:1rem;align-items:baseline;padding:.8rem 1.5rem;background:#1d2330;color:#fff}
header a{color:#fff;text-decoration:none;font-weight:600}header .where{color:#c5cbd6}header .live{margin-left:auto;font-size:12px;color:#c5cbd6}
main{padding:1rem 1.5rem;max-width:1300px}h1{font-size:20px;margin:.2rem 0 1rem}h2{font-size:15px;margin:1.4rem 0 .5rem;color:var(--muted);text-transform:uppercase;letter-spacing:.04em}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid var(--line)}th,td{text-align:left;padding:.4rem .6rem;border-bottom:1px solid var(--line);vertical-align:top}
th{font-size:12px;color:var(--muted);font-weight:600;background:#fafbfc}td.reason{color:var(--muted);max-width:480px}
.state{display:inline-block;padding:0 .5rem;border-radius:9px;font-size:12px;font-weight:600;border:1px solid currentColor}
.state.Ready{color:var(--ok)}.state.Warning{color:var(--warn)}.state.Error{color:var(--err)}.state.Processing,.state.Deleting{color:var(--busy)}
.state.Unknown,.state.Unmanaged{color:var(--muted)}.summary{font-size:16px}.fields{display:grid;grid-template-columns:9rem 1fr;gap:.3rem 1rem;background:#fff;border:1px solid var(--line);padding:.8rem}
.fields dt{color:var(--muted)}.fields dd{margin:0}.muted{color:var(--muted)}ol.advice li{margin-bottom:.5rem}code{font:12px ui-monospace,monospace;background:#eef0f3;padding:0 .25rem}
ul.events{list-style:none;padding:0;margin:0;font:12px ui-monospace,monospace}ul.events li{padding:.2rem 0;border-bottom:1px dashed var(--line)}
.notice{background:#fff;border:1px solid var(--line);border-left:4px solid var(--warn);padding:1rem;max-width:640px}
form input{width:100%;padding:.4rem;font:12px ui-monospace,monospace;margin:.5rem 0}button{padding:.35rem .9rem}
`;

const SCRIPT = `
'use strict';
const TOKEN_KEY = 'skr-console-token';
const ORDER = ['Error','Warning','Deleting','Processing','Unknown','Unmanaged','Ready'];
const app = document.getElementById('app');
const liveBadge = document.getElementById('live');
const documentAccess = document.body.dataset.access;
const initial = new URL(location.href);
if (initial.searchParams.has('token')) {
  // A one-time link: keep the token for this tab only and take it out of the address bar and history.
  sessionStorage.setItem(TOKEN_KEY, initial.searchParams.get('token'));
  initial.searchParams.delete('token');
  history.replaceState(null, '', initial.pathname + initial.search + initial.hash);
}
const token = () => sessionStorage.getItem(TOKEN_KEY);
function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (key === 'class') node.className = value; else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat()) if (child !== undefined && child !== null) node.append(child instanceof Node ? child : String(child));
  return node;
}
const state = (value) => el('span', { class: 'state ' + value, 'data-state': value }, value);
const rank = (key) => (ORDER.includes(key) ? ORDER.indexOf(key) : ORDER.length);
const counts = (byKey) => Object.entries(byKey).sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b)).map(([k, n]) => n + ' ' + k).join(', ');
const age = (at) => { if (!at) return '-'; const s = Math.max(0, Math.round((Date.now() - new Date(at).getTime()) / 1000)); return s < 120 ? s + 's' : s < 7200 ? Math.round(s / 60) + 'm' : s < 172800 ? Math.round(s / 3600) + 'h' : Math.round(s / 86400) + 'd'; };
const table = (header, rows, testid) => el('table', testid ? { 'data-testid': testid } : {}, el('thead', {}, el('tr', {}, header.map((h) => el('th', {}, h)))), el('tbody', {}, rows));
class Refused extends Error { constructor(status, text) { super(text); this.status = status; } }
async function api(path) {
  const response = await fetch(path, { headers: { authorization: 'Bearer ' + token() }, cache: 'no-store' });
  if (response.status === 401 || response.status === 403) throw new Refused(response.status, await response.text());
  if (!response.ok) throw new Error(path + ': HTTP ' + response.status + ' ' + (await response.text()));
  return response.json();
}
function kymaOfPath() { const m = /^\\/kymas\\/([^/]+)$/.exec(location.pathname); return m ? decodeURIComponent(m[1]) : undefined; }
function go(path) { history.pushState(null, '', path); void show(); }
const link = (path, text) => el('a', { href: path, onclick: (e) => { e.preventDefault(); go(path); } }, text);
function signIn(why) {
  liveBadge.textContent = '';
  const input = el('input', { type: 'password', autocomplete: 'off', placeholder: 'bearer token', 'aria-label': 'bearer token' });
  app.replaceChildren(el('div', { class: 'notice', 'data-testid': 'sign-in' },
    el('p', {}, why),
    el('form', { onsubmit: (e) => { e.preventDefault(); if (input.value.trim()) { sessionStorage.setItem(TOKEN_KEY, input.value.trim()); void show(); } } },
      el('label', {}, 'Token (kept in this tab only, sent as Authorization: Bearer):'), input, el('button', { type: 'submit' }, 'Open'))));
}
function overview(fleet) {
  const paused = fleet.kymas.paused ? ' (' + fleet.kymas.paused + ' paused)' : '';
  const rows = fleet.rows.map((row) => {
    const ready = row.modules.filter((m) => m.state === 'Ready' || m.state === 'Unmanaged').length;
    return el('tr', { 'data-kyma': row.name }, el('td', {}, link('/kymas/' + encodeURIComponent(row.name), row.name)), el('td', {}, state(row.state)),
      el('td', {}, row.runtimeId || '-'), el('td', {}, ready + '/' + row.modules.length), el('td', {}, row.paused ? 'by ' + (row.paused.by || '?') : '-'),
      el('td', { class: 'reason' }, row.reason || ''));
  });
  const modules = fleet.modules.map((m) => el('tr', { 'data-module': m.name }, el('td', {}, m.name), el('td', {}, String(m.kymas)),
    el('td', {}, Object.entries(m.states).flatMap(([s, n]) => [state(s), ' ' + n + ' '])),
    el('td', {}, Object.entries(m.versions).map(([v, n]) => v + ' \\u00d7' + n).join(', '))));
  return [el('h1', {}, 'Fleet'),
    el('p', { class: 'summary', 'data-testid': 'fleet-summary' }, fleet.kymas.total + ' Kymas in ' + fleet.namespace + (fleet.kymas.total ? ': ' + counts(fleet.kymas.states) : '') + paused),
    el('h2', {}, 'Modules'), fleet.modules.length ? table(['Module', 'Kymas', 'States', 'Versions'], modules, 'modules') : el('p', { class: 'muted' }, 'no modules'),
    el('h2', {}, 'Kymas, the unhealthy first'), table(['Kyma', 'State', 'Runtime ID', 'Modules ready', 'Paused', 'Reason'], rows, 'kymas')];
}
function condition(kyma, type) { return (kyma.conditions || []).find((c) => c.type === type); }
function conditionLine(c, missing) { return c ? (c.status === 'True' ? 'healthy: ' : 'NOT healthy: ') + (c.reason || '') + (c.message ? ': ' + c.message : '') + ' (since ' + age(c.lastTransitionTime) + ')' : missing; }
function certificateLine(c) {
  if (!c) return '-'; if (c.kind === 'missing') return 'none in Secret ' + c.secret; if (c.kind === 'unreadable') return 'not shown: ' + c.why;
  const days = Math.floor((new Date(c.notAfter).getTime() - Date.now()) / 86400000);
  return (days < 0 ? 'EXPIRED at ' : 'expires ') + c.notAfter + (days < 0 ? '' : ' (in ' + days + ' d)') + '; CN ' + c.commonName + ', issuer ' + c.issuer;
}
function kymaPage(data) {
  const k = data.kyma;
  const field = (label, value) => [el('dt', {}, label), el('dd', {}, value)];
  return [el('p', {}, link('/', '\\u2190 Fleet')), el('h1', {}, 'Kyma ' + k.namespace + '/' + k.name + ' ', state(k.state)),
    el('dl', { class: 'fields', 'data-testid': 'kyma-fields' },
      field('Runtime ID', k.runtimeId || '- (no runtime-id label: the listener cannot wake it)'),
      field('State', [state(k.state), k.lastOperation ? ' last status write ' + age(k.lastOperation.lastUpdateTime) + ' ago: ' + k.lastOperation.operation : ' no pass recorded yet']),
      field('Paused', k.paused ? 'yes, by ' + (k.paused.by || 'someone') + (k.paused.reason ? ': ' + k.paused.reason : '') : 'no'),
      field('Channel', k.channel || '-'), field('Owner', k.owner || '-'),
      field('SKR', conditionLine(condition(k, 'SKRConnected'), 'not reported yet')),
      field('Webhook', conditionLine(condition(k, 'SKRWebhook'), 'not reported') + (k.webhookUrl ? '; runs outside the SKR at ' + k.webhookUrl : '')),
      field('Certificate', certificateLine(k.certificate)), field('Reason', k.reason || '-')),
    el('h2', {}, 'Modules'), k.modules.length ? table(['Module', 'State', 'Version', 'Channel', 'Manifest', 'Last operation', 'Reason'], k.modules.map((m) => el('tr', { 'data-module': m.name },
      el('td', {}, m.name), el('td', {}, state(m.state)), el('td', {}, m.version || '-'), el('td', {}, m.channel || '-'),
      el('td', {}, m.manifest ? m.manifest.name + ' (' + m.manifest.state + ')' : '-'),
      el('td', {}, m.manifest && m.manifest.lastOperation ? m.manifest.lastOperation + ' (' + age(m.manifest.lastUpdateTime) + ' ago)' : '-'),
      el('td', { class: 'reason' }, m.reason || ''))), 'modules') : el('p', { class: 'muted' }, 'none'),
    el('h2', {}, 'Conditions'), k.conditions.length ? table(['Type', 'Status', 'Reason', 'Since', 'Message'], k.conditions.map((c) => el('tr', {},
      el('td', {}, c.type), el('td', {}, c.status), el('td', {}, c.reason || '-'), el('td', {}, age(c.lastTransitionTime)), el('td', { class: 'reason' }, c.message || '')))) : el('p', { class: 'muted' }, 'none (no pass has written a status yet)'),
    el('h2', {}, 'Events (oldest first)'), data.events.length ? table(['Last seen', 'Type', 'Reason', 'Count', 'From', 'Message'], data.events.map((e) => el('tr', {},
      el('td', {}, age(e.time)), el('td', {}, e.type), el('td', {}, e.reason), el('td', {}, String(e.count)), el('td', {}, e.from), el('td', { class: 'reason' }, e.message)))) : el('p', { class: 'muted' }, 'none'),
    el('h2', {}, 'What to do'), data.advice.length ? el('ol', { class: 'advice' }, data.advice.map((a) => el('li', {}, el('strong', {}, a.runbook), ': ' + a.because, el('br'), 'first step: ', el('code', {}, a.firstStep))))
      : el('p', {}, k.state === 'Ready' ? 'nothing: the Kyma is Ready and nothing the agent records is wrong' : 'nothing named yet: state ' + k.state),
    data.notShown.length ? [el('h2', {}, 'Not shown'), el('ul', {}, data.notShown.map((n) => el('li', {}, n)))] : []];
}
const callbacks = [];
function callbackList() {
  return [el('h2', {}, 'Live callbacks'), callbacks.length ? el('ul', { class: 'events', 'data-testid': 'callbacks' }, callbacks.map((e) => el('li', {}, e.time + '  ' + e.runtimeId + '  ' + e.kind + '  ' + (e.namespace ? e.namespace + '/' : '') + e.name)))
    : el('p', { class: 'muted', 'data-testid': 'callbacks' }, 'none since this page opened')];
}
let shown = 0;
async function show() {
  if (!token()) return signIn(documentAccess === 'forbidden' ? 'This token may not read Kymas here.' : 'Sign in with a bearer token whose user may get Kymas in this namespace.');
  const kyma = kymaOfPath();
  const mine = ++shown;
  try {
    const data = await api(kyma ? '/api/kymas/' + encodeURIComponent(kyma) : '/api/fleet');
    if (mine !== shown) return;
    app.replaceChildren(...(kyma ? kymaPage(data) : overview(data)).flat(), ...callbackList());
    app.dataset.updated = new Date().toISOString();
    document.title = (kyma ? kyma + ' \\u2013 ' : '') + 'skr-watcher console';
    connect();
  } catch (error) {
    if (error instanceof Refused) { if (error.status === 401) sessionStorage.removeItem(TOKEN_KEY); return signIn(error.status === 401 ? 'The API server did not accept this token (401).' : 'Forbidden (403): ' + error.message); }
    app.replaceChildren(el('div', { class: 'notice' }, String(error.message || error)));
  }
}
let stream;
let refresh;
function connect() {
  const want = kymaOfPath() || '';
  if (stream && stream.kyma === want) return;
  if (stream) stream.abort.abort();
  const abort = new AbortController();
  stream = { kyma: want, abort };
  const query = want ? '?kyma=' + encodeURIComponent(want) : '';
  fetch('/api/stream' + query, { headers: { authorization: 'Bearer ' + token() }, signal: abort.signal }).then(async (response) => {
    if (!response.ok || !response.body) throw new Error('HTTP ' + response.status);
    liveBadge.textContent = '\\u25cf live';
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.indexOf('\\n\\n')) >= 0) { onMessage(buffer.slice(0, end)); buffer = buffer.slice(end + 2); }
    }
  }).catch(() => {}).finally(() => {
    if (stream && stream.abort === abort) { stream = undefined; liveBadge.textContent = 'reconnecting\\u2026'; setTimeout(() => { if (!stream && token()) connect(); }, 2000); }
  });
}
function onMessage(block) {
  let type = 'message'; let data = '';
  for (const line of block.split('\\n')) { if (line.startsWith('event: ')) type = line.slice(7); else if (line.startsWith('data: ')) data += line.slice(6); }
  if (!data) return;
  const message = JSON.parse(data);
  const kyma = kymaOfPath();
  if (type === 'callback') { callbacks.unshift(message); callbacks.length = Math.min(callbacks.length, 20); }
  if (type === 'change' && kyma && !message.kymas.includes(kyma)) return;
  clearTimeout(refresh); refresh = setTimeout(() => void show(), 100);
}
window.addEventListener('popstate', () => void show());
void show();
`;

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** The document; `access` is what the document request's token got (the script signs in again when it is not `allowed`). */
export function consolePage(options: { nonce: string; access: MetricsAccess; namespace: string }): string {
  const nonce = escapeHtml(options.nonce);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><title>skr-watcher console</title><style nonce="${nonce}">${STYLE}</style></head>
<body data-access="${escapeHtml(options.access)}"><header><a href="/">skr-watcher console</a><span class="where">KCP namespace ${escapeHtml(options.namespace)} · read-only</span><span class="live" id="live"></span></header>
<main id="app"><p class="muted">loading…</p></main><script nonce="${nonce}">${SCRIPT}</script></body></html>
`;
}
