// Almanac console: a single-page app over the JSON API described in docs/console.md.
// Views are chosen by the URL fragment; each view renders into main#view and, once its
// data is drawn, sets main#view[data-ready] to the view's name.
//
// core.js: the shared groundwork, loaded first (after uPlot): DOM helpers, formatting,
// API access, table targets, uPlot chart helpers, the router (route, navigate), the
// navigation context with its data-ready handling, and the not-found view.
// The views live in keyvis.js, views.js and metrics.js; app.js starts the router.
'use strict';

// ---------------------------------------------------------------------------
// DOM helpers
// ---------------------------------------------------------------------------

// Creates an element. Attributes named on* become event listeners; null/false are skipped.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value == null || value === false) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'class') el.className = value;
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  return append(el, children);
}

// Appends nodes and strings (nested arrays allowed; null and false skipped).
function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child == null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

function errorBox(message) {
  return h('div', { class: 'error' }, message);
}

function mono(text) {
  return h('code', {}, text);
}

// A <select> whose options are [value, label] pairs.
function selectOf(id, options, selected, onChange) {
  const el = h('select', { id, onchange: () => onChange(el.value) },
    options.map(([value, label]) => h('option', { value }, label)));
  el.value = String(selected);
  return el;
}

// A label wrapping a caption and a form control.
function field(caption, control) {
  return h('label', { class: 'field' }, h('span', {}, caption), control);
}

// ---------------------------------------------------------------------------
// Formatting
// ---------------------------------------------------------------------------

const numberFormat = new Intl.NumberFormat('en-US', { maximumFractionDigits: 2 });

function fmtNum(n) {
  return n == null || Number.isNaN(n) ? '–' : numberFormat.format(n);
}

function fmtBytes(n) {
  if (n == null) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  let v = Math.abs(n);
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  const text = i === 0 ? numberFormat.format(v) : v.toFixed(v < 10 ? 1 : 0);
  return (n < 0 ? '-' : '') + text + ' ' + units[i];
}

function pad2(n) {
  return String(n).padStart(2, '0');
}

// "HH:MM" (or "HH:MM:SS" when withSeconds) of a millisecond time, in UTC.
function fmtClock(ms, withSeconds) {
  const d = new Date(ms);
  const hm = pad2(d.getUTCHours()) + ':' + pad2(d.getUTCMinutes());
  return withSeconds ? hm + ':' + pad2(d.getUTCSeconds()) : hm;
}

// "YYYY-MM-DD HH:MM" of a millisecond time, in UTC.
function fmtDateTime(ms, withSeconds) {
  const d = new Date(ms);
  return d.getUTCFullYear() + '-' + pad2(d.getUTCMonth() + 1) + '-' + pad2(d.getUTCDate()) +
    ' ' + fmtClock(ms, withSeconds);
}

// A duration in ms as "30 s", "5 min", "2 h" or "3 d".
function fmtDuration(ms) {
  const units = [[86400000, 'd'], [3600000, 'h'], [60000, 'min'], [1000, 's']];
  for (const [size, name] of units) {
    if (ms >= size && ms % size === 0) return (ms / size) + ' ' + name;
  }
  return ms >= 1000 ? fmtNum(ms / 1000) + ' s' : ms + ' ms';
}

// Parses Timestream's timestamp text "YYYY-MM-DD HH:MM:SS.fffffffff" (UTC) into ms.
function parseTimestamp(text) {
  if (typeof text !== 'string') return null;
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?/.exec(text);
  if (!m) return null;
  const [, y, mo, d, hh = '0', mm = '0', ss = '0', frac = ''] = m;
  const ms = Date.UTC(+y, +mo - 1, +d, +hh, +mm, +ss);
  return ms + Number(frac.padEnd(9, '0')) / 1e6;
}

// ---------------------------------------------------------------------------
// API access
// ---------------------------------------------------------------------------

// An error answer from the API (or an unreachable server), shown to the user as is.
class ApiError extends Error {}

// The bearer token of a server with principals (asked for on the first 401, kept for
// the browser tab's life).
const TOKEN_KEY = 'almanac-token';

function withToken(options) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (!token) return options;
  const opts = Object.assign({}, options);
  opts.headers = Object.assign({}, opts.headers || {}, { Authorization: `Bearer ${token}` });
  return opts;
}

// Fetches JSON; a non-2xx answer throws an ApiError carrying the API's `error` message.
// A 401 asks for a token (from `almanac auth create-principal`) and tries again.
async function api(path, options) {
  let res;
  let text;
  try {
    res = await fetch(path, withToken(options));
    if (res.status === 401) {
      const token = window.prompt('This server needs a token (almanac auth create-principal):');
      if (token) {
        sessionStorage.setItem(TOKEN_KEY, token.trim());
        res = await fetch(path, withToken(options));
      }
    }
    text = await res.text();
  } catch (err) {
    throw new ApiError(`${path}: ${err.message}`);
  }
  let body = null;
  try { body = text ? JSON.parse(text) : {}; } catch (_) { body = null; }
  if (!res.ok) {
    throw new ApiError(body && body.error ? body.error : `HTTP ${res.status} ${res.statusText}`.trim());
  }
  if (body == null) throw new ApiError(`${path}: the answer is not JSON`);
  return body;
}

function query(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v != null) q.set(k, v);
  return path + '?' + q;
}

// ---------------------------------------------------------------------------
// Table targets: a Bigtable table or a time-series table, as used by the Key Visualizer
// and the advisor. Select values are "bt/ENC(instance)/ENC(table)" or "ts/ENC(db)/ENC(table)".
// ---------------------------------------------------------------------------

const enc = encodeURIComponent;

function target(kind, a, b) {
  return { kind, a, b };
}

function targetValue(t) {
  return `${t.kind}/${enc(t.a)}/${enc(t.b)}`;
}

function targetLabel(t) {
  return t.kind === 'bt' ? `${t.a}/${t.b}` : `${t.a}.${t.b}`;
}

function targetParams(t) {
  return t.kind === 'bt' ? { instance: t.a, table: t.b } : { database: t.a, ts_table: t.b };
}

// Parses ["bt", instance…, table] or ["ts", db, table] (already decoded path parts).
function parseTarget(parts) {
  if (parts[0] === 'bt' && parts.length >= 3) {
    return target('bt', parts.slice(1, -1).join('/'), parts[parts.length - 1]);
  }
  if (parts[0] === 'ts' && parts.length === 3) return target('ts', parts[1], parts[2]);
  return null;
}

function parseTargetValue(value) {
  return parseTarget(value.split('/').map(decodeURIComponent));
}

// Every table listed by /api/overview, Bigtable tables first.
function overviewTargets(ov) {
  const bt = (ov.instances || []).flatMap((i) => (i.tables || []).map((t) => target('bt', i.name, t.name)));
  const ts = (ov.timeseries || []).flatMap((d) => (d.tables || []).map((t) => target('ts', d.database, t.name)));
  return { bt, ts };
}

// A <select> of every table, grouped by kind; `current` is added when it is not listed.
function tableSelect(id, ov, current, onChange) {
  const { bt, ts } = overviewTargets(ov);
  const listed = [...bt, ...ts].map(targetValue);
  const option = (t) => h('option', { value: targetValue(t) }, targetLabel(t));
  const el = h('select', { id, onchange: () => onChange(parseTargetValue(el.value)) },
    current && !listed.includes(targetValue(current)) ? option(current) : null,
    bt.length ? h('optgroup', { label: 'Bigtable' }, bt.map(option)) : null,
    ts.length ? h('optgroup', { label: 'Time series' }, ts.map(option)) : null);
  if (current) el.value = targetValue(current);
  return el;
}

function firstTarget(ov) {
  const { bt, ts } = overviewTargets(ov);
  return bt[0] || ts[0] || null;
}

// Replaces the URL fragment without triggering a navigation.
function replaceRoute(hash) {
  history.replaceState(null, '', hash);
}

// ---------------------------------------------------------------------------
// Charts (uPlot)
// ---------------------------------------------------------------------------

const PALETTE = ['#2f6fdf', '#e8590c', '#2b8a3e', '#c2255c', '#7048e8',
  '#0c8599', '#e67700', '#5c940d', '#862e9c', '#495057'];

// Time axis ticks in UTC: "HH:MM" (with seconds for sub-minute ticks), the date over long spans.
function timeTicks(u, splits, axisIdx, space, incr) {
  const span = u.scales.x.max - u.scales.x.min;
  return splits.map((s) => {
    const ms = s * 1000;
    if (incr >= 86400) return fmtDateTime(ms).slice(5, 10);
    if (span > 86400) return fmtDateTime(ms).slice(5);
    return fmtClock(ms, incr < 60);
  });
}

// Creates a time-series line chart in `container`. series: [{label}], format: y tick formatter,
// live: whether the legend shows the values under the cursor.
function lineChart(container, { series, format, height, live = true }) {
  const fmt = format || fmtNum;
  const axis = { stroke: '#555', grid: { stroke: '#eee' }, ticks: { stroke: '#ddd' } };
  const opts = {
    width: Math.max(280, container.clientWidth),
    height: height || 220,
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1e3), 'Etc/UTC'),
    legend: { live },
    cursor: { drag: { x: true, y: false, setScale: true } },
    scales: { x: { time: true }, y: { range: (u, min, max) => [Math.min(0, min ?? 0), max > 0 ? max * 1.1 : 1] } },
    axes: [
      { ...axis, values: timeTicks },
      { ...axis, size: 70, values: (u, splits) => splits.map(fmt) },
    ],
    series: [
      { label: 'time (UTC)', value: (u, v) => (v == null ? '–' : fmtDateTime(v * 1e3, true)) },
      ...series.map((s, i) => ({
        label: s.label,
        stroke: PALETTE[i % PALETTE.length],
        width: 1.5,
        spanGaps: true,
        points: { show: false },
        value: (u, v) => (v == null ? '–' : fmt(v)),
      })),
    ],
  };
  return new uPlot(opts, [[], ...series.map(() => [])], container);
}

// Resizes charts to their containers' widths when the window is resized.
function fitChartsOnResize(ctx, getCharts) {
  let timer = null;
  const onResize = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      for (const { plot, el } of getCharts()) {
        if (plot) plot.setSize({ width: Math.max(280, el.clientWidth), height: plot.height });
      }
    }, 150);
  };
  window.addEventListener('resize', onResize);
  ctx.onLeave(() => { clearTimeout(timer); window.removeEventListener('resize', onResize); });
}

// ---------------------------------------------------------------------------
// Router and navigation context
// ---------------------------------------------------------------------------

let current = null;

// A navigation's context: whether it is still on screen, cleanups to run when leaving,
// and the data-ready flag of main#view.
function navContext(main) {
  const cleanups = [];
  const ctx = {
    main,
    alive: true,
    add(...children) { append(main, children); },
    onLeave(fn) { cleanups.push(fn); },
    ready(name) { if (ctx.alive) main.setAttribute('data-ready', name); },
    unready() { if (ctx.alive) main.removeAttribute('data-ready'); },
    leave() {
      ctx.alive = false;
      for (const fn of cleanups) {
        try { fn(); } catch (err) { console.error(err); }
      }
    },
  };
  return ctx;
}

// Maps the URL fragment to {name, nav, title, render}.
function route(hash) {
  const parts = hash.replace(/^#\/?/, '').split('/').filter((p) => p !== '').map((p) => {
    try { return decodeURIComponent(p); } catch (_) { return p; }
  });
  const [head, ...rest] = parts;
  const last = rest[rest.length - 1];
  switch (head) {
    case undefined:
      return { name: 'overview', title: 'Overview', render: overviewView };
    case 'table':
      if (rest.length >= 2) {
        const inst = rest.slice(0, -1).join('/');
        return { name: 'table', nav: 'overview', title: last, render: (ctx) => tableView(ctx, inst, last) };
      }
      break;
    case 'ts':
      if (rest.length === 2) {
        return { name: 'ts', nav: 'overview', title: `${rest[0]}.${last}`, render: (ctx) => tsView(ctx, rest[0], last) };
      }
      break;
    case 'sql':
      return { name: 'sql', title: 'SQL', render: sqlView };
    case 'keyvis':
      return { name: 'keyvis', title: 'Key Visualizer', render: (ctx) => keyvisView(ctx, parseTarget(rest)) };
    case 'advisor':
      return { name: 'advisor', title: 'Schema advisor', render: (ctx) => advisorView(ctx, parseTarget(rest)) };
    case 'metrics':
      return { name: 'metrics', title: 'Metrics', render: metricsView };
    default:
      break;
  }
  return { name: 'notfound', nav: null, title: 'Not found', render: notFoundView };
}

// Leaves the current view and renders the one named by the URL fragment.
function navigate() {
  const main = document.getElementById('view');
  if (current) current.leave();
  main.removeAttribute('data-ready');
  main.replaceChildren();
  const ctx = navContext(main);
  current = ctx;

  const r = route(location.hash);
  const navName = r.nav === undefined ? r.name : r.nav;
  for (const a of document.querySelectorAll('#nav a[data-view]')) {
    a.classList.toggle('active', a.dataset.view === navName);
  }
  document.title = `${r.title} · Almanac`;

  Promise.resolve()
    .then(() => r.render(ctx))
    .catch((err) => {
      if (!ctx.alive) return;
      if (!(err instanceof ApiError)) console.error(err);
      main.append(errorBox(err.message));
      ctx.ready(r.name);
    });
}

function notFoundView(ctx) {
  ctx.add(h('h1', {}, 'Not found'),
    h('p', {}, 'No view at ', mono(location.hash), '. ', h('a', { href: '#/' }, 'Back to the overview.')));
}
