// Almanac console: a single-page app over the JSON API described in docs/console.md.
// Views are chosen by the URL fragment; each view renders into main#view and, once its
// data is drawn, sets main#view[data-ready] to the view's name.
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

// Fetches JSON; a non-2xx answer throws an ApiError carrying the API's `error` message.
async function api(path, options) {
  let res;
  let text;
  try {
    res = await fetch(path, options);
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

// ---------------------------------------------------------------------------
// Overview (#/)
// ---------------------------------------------------------------------------

async function overviewView(ctx) {
  const ov = await api('/api/overview');
  if (!ctx.alive) return;
  ctx.add(
    h('h1', {}, 'Overview'),
    h('p', { class: 'muted' }, `Almanac ${ov.version || ''} · data directory `, mono(ov.data_dir || '')),
    h('h2', {}, 'Bigtable tables'),
    bigtableTables(ov),
    h('h2', {}, 'Time-series tables'),
    timeseriesTables(ov));
  ctx.ready('overview');
}

function yesNo(flag) {
  return h('span', { class: flag ? 'yes' : 'no' }, flag ? 'yes' : 'no');
}

// Families as "name  gc rule · value type" lines.
function familyList(families) {
  if (!families || !families.length) return h('span', { class: 'muted' }, 'none');
  return h('ul', { class: 'plain' }, families.map((f) =>
    h('li', {}, mono(f.name), ' ', h('span', { class: 'muted' }, `${f.gc_rule} · ${f.value_type}`))));
}

function bigtableTables(ov) {
  const instances = ov.instances || [];
  const rows = instances.flatMap((inst) => (inst.tables || []).map((t) =>
    h('tr', { 'data-instance': inst.name, 'data-table': t.name },
      h('td', {}, mono(inst.name)),
      h('td', {}, h('a', { href: `#/table/${enc(inst.name)}/${enc(t.name)}` }, mono(t.name))),
      h('td', {}, familyList(t.families)),
      h('td', {}, yesNo(t.deletion_protection)),
      h('td', {}, yesNo(t.change_stream)))));
  const empty = instances.filter((i) => !(i.tables || []).length).map((i) => i.name);
  return [
    h('table', { id: 'bt-tables', class: 'grid' },
      h('thead', {}, h('tr', {}, ['Instance', 'Table', 'Column families (GC rule · value type)',
        'Deletion protection', 'Change stream'].map((c) => h('th', {}, c)))),
      h('tbody', {}, rows)),
    rows.length ? null : h('p', { class: 'muted' }, 'No Bigtable tables yet.'),
    empty.length ? h('p', { class: 'muted' }, 'Instances without tables: ', empty.map((n, i) => [i ? ', ' : '', mono(n)])) : null,
  ];
}

function retentionText(t) {
  return `${fmtNum(t.memory_hours)} h memory · ${fmtNum(t.magnetic_days)} d magnetic`;
}

function dimensionName(d) {
  return typeof d === 'string' ? d : d.name;
}

function timeseriesTables(ov) {
  const rows = (ov.timeseries || []).flatMap((db) => (db.tables || []).map((t) =>
    h('tr', { 'data-database': db.database, 'data-table': t.name },
      h('td', {}, mono(db.database)),
      h('td', {}, h('a', { href: `#/ts/${enc(db.database)}/${enc(t.name)}` }, mono(t.name))),
      h('td', {}, retentionText(t)),
      h('td', {}, (t.dimensions || []).map((d, i) => [i ? ', ' : '', mono(dimensionName(d))])),
      h('td', { class: 'num' }, fmtNum((t.measures || []).length)))));
  return [
    h('table', { id: 'ts-tables', class: 'grid' },
      h('thead', {}, h('tr', {}, ['Database', 'Table', 'Retention', 'Dimensions', 'Measures']
        .map((c) => h('th', {}, c)))),
      h('tbody', {}, rows)),
    rows.length ? null : h('p', { class: 'muted' }, 'No time-series tables yet.'),
  ];
}

// ---------------------------------------------------------------------------
// Bigtable table view (#/table/INSTANCE/TABLE)
// ---------------------------------------------------------------------------

async function tableView(ctx, instance, tableName) {
  const ov = await api('/api/overview');
  if (!ctx.alive) return;
  const inst = (ov.instances || []).find((i) => i.name === instance);
  const table = inst && (inst.tables || []).find((t) => t.name === tableName);
  const tgt = target('bt', instance, tableName);

  ctx.add(
    h('div', { class: 'crumbs' }, h('a', { href: '#/' }, 'Overview'), ' / ', mono(instance)),
    h('h1', {}, 'Table ', mono(tableName)));
  if (table) {
    ctx.add(
      h('dl', { class: 'props' },
        h('dt', {}, 'Instance'), h('dd', {}, mono(instance)),
        h('dt', {}, 'Deletion protection'), h('dd', {}, yesNo(table.deletion_protection)),
        h('dt', {}, 'Change stream'), h('dd', {}, yesNo(table.change_stream))),
      h('h2', {}, 'Column families'),
      familiesTable(table.families || []));
  } else {
    ctx.add(h('p', { class: 'muted' }, 'This table is not listed by the server\'s overview.'));
  }
  await embedComponents(ctx, ov, tgt, 'table');
}

function familiesTable(families) {
  return h('table', { id: 'table-families', class: 'grid' },
    h('thead', {}, h('tr', {}, ['Family', 'GC rule', 'Value type'].map((c) => h('th', {}, c)))),
    h('tbody', {}, families.map((f) =>
      h('tr', { 'data-family': f.name }, h('td', {}, mono(f.name)), h('td', {}, mono(f.gc_rule)), h('td', {}, f.value_type)))));
}

// Appends the Key Visualizer and the advisor for one table, then marks the view ready.
async function embedComponents(ctx, ov, tgt, readyName) {
  const kv = keyvisComponent(ctx, ov, tgt, { readyName });
  const lint = lintComponent(ctx, ov, tgt, { readyName });
  ctx.add(
    h('h2', {}, 'Key Visualizer ', h('a', { class: 'small', href: `#/keyvis/${targetValue(tgt)}` }, 'open full view')),
    kv.el,
    h('h2', {}, 'Schema advisor'),
    lint.el);
  await Promise.all([kv.load(), lint.load()]);
  ctx.ready(readyName);
}

// ---------------------------------------------------------------------------
// Time-series table view (#/ts/DB/TABLE)
// ---------------------------------------------------------------------------

async function tsView(ctx, database, tableName) {
  const ov = await api('/api/overview');
  if (!ctx.alive) return;
  const db = (ov.timeseries || []).find((d) => d.database === database);
  const table = db && (db.tables || []).find((t) => t.name === tableName);
  const tgt = target('ts', database, tableName);

  ctx.add(
    h('div', { class: 'crumbs' }, h('a', { href: '#/' }, 'Overview'), ' / ', mono(database)),
    h('h1', {}, 'Time-series table ', mono(`${database}.${tableName}`)));
  if (table) {
    ctx.add(tsProperties(table),
      h('div', { class: 'columns' },
        h('div', {}, h('h2', {}, 'Dimensions'),
          h('ul', { id: 'ts-dimensions', class: 'chips' },
            (table.dimensions || []).map((d) => h('li', { class: 'dimension' }, mono(dimensionName(d))))),
          (table.dimensions || []).length ? null : h('p', { class: 'muted' }, 'No dimensions recorded yet.')),
        h('div', {}, h('h2', {}, 'Measures'),
          h('ul', { id: 'ts-measures', class: 'chips' },
            (table.measures || []).map((m) => h('li', { class: 'measure' },
              h('code', { class: 'name' }, m.name), ' ', h('span', { class: 'type' }, m.type)))),
          (table.measures || []).length ? null : h('p', { class: 'muted' }, 'No measures recorded yet.'))));
  } else {
    ctx.add(h('p', { class: 'muted' }, 'This table is not listed by the server\'s overview.'));
  }
  await embedComponents(ctx, ov, tgt, 'ts');
}

function tsProperties(t) {
  const storage = t.storage ? `${t.storage.instance}/${t.storage.table}` : '–';
  return h('dl', { class: 'props' },
    h('dt', {}, 'Layout'), h('dd', {}, mono(t.layout || '–')),
    h('dt', {}, 'Retention'), h('dd', {}, retentionText(t)),
    h('dt', {}, 'Magnetic store writes'), h('dd', {}, yesNo(t.magnetic_writes)),
    h('dt', {}, 'Partition key'), h('dd', {},
      (t.partition_key || []).length ? t.partition_key.map((k, i) => [i ? ', ' : '', mono(k)]) : h('span', { class: 'muted' }, 'none')),
    h('dt', {}, 'Storage table'), h('dd', {}, mono(storage)));
}

// ---------------------------------------------------------------------------
// SQL (#/sql)
// ---------------------------------------------------------------------------

const SQL_MAX_ROWS = 10000;
const sqlState = { text: 'SHOW DATABASES', instance: '' };

function sqlView(ctx) {
  const input = h('textarea', { id: 'sql-input', rows: 7, spellcheck: 'false', autocomplete: 'off' });
  input.value = sqlState.text;
  const runButton = h('button', { id: 'sql-run', type: 'button', class: 'primary' }, 'Run');
  const status = h('span', { id: 'sql-status', class: 'muted' }, 'Ctrl+Enter runs the query');
  const instanceSelect = h('select', { id: 'sql-instance' }, h('option', { value: '' }, 'server default'));
  const examples = h('div', { class: 'examples' });
  const errorSlot = h('div');
  const chart = h('div', { id: 'sql-chart', hidden: true });
  const result = h('div', { class: 'result-wrap' });
  let plot = null;
  let seq = 0;

  const clearChart = () => {
    if (plot) { plot.destroy(); plot = null; }
    chart.replaceChildren();
    chart.hidden = true;
  };

  const run = async () => {
    if (!input.value.trim()) return;
    sqlState.text = input.value;
    const mine = ++seq;
    status.dataset.state = 'running';
    status.textContent = 'running…';
    errorSlot.replaceChildren();
    result.replaceChildren();
    clearChart();
    runButton.disabled = true;
    try {
      const body = { sql: input.value };
      if (instanceSelect.value) body.instance = instanceSelect.value;
      const res = await api('/api/sql', {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
      });
      if (!ctx.alive || mine !== seq) return;
      const columns = res.columns || [];
      const rows = (res.rows || []).slice(0, SQL_MAX_ROWS);
      result.append(resultTable(columns, rows));
      plot = drawSqlChart(chart, columns, rows);
      status.textContent = sqlStatusText(rows.length, res);
      status.dataset.state = 'done';
    } catch (err) {
      if (!ctx.alive || mine !== seq) return;
      status.textContent = 'error';
      status.dataset.state = 'error';
      errorSlot.replaceChildren(h('div', { id: 'sql-error', class: 'error' }, err.message));
    } finally {
      if (mine === seq) runButton.disabled = false;
    }
  };

  runButton.addEventListener('click', run);
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); run(); }
  });
  instanceSelect.addEventListener('change', () => { sqlState.instance = instanceSelect.value; });
  ctx.onLeave(clearChart);
  fitChartsOnResize(ctx, () => [{ plot, el: chart }]);

  ctx.add(
    h('h1', {}, 'SQL'),
    h('p', { class: 'muted' }, 'Timestream\'s dialect for ', mono('"db"."table"'),
      ', Bigtable tables by name. Results stop at 10,000 rows.'),
    input,
    h('div', { class: 'toolbar' }, runButton, field('Instance', instanceSelect), status),
    examples,
    errorSlot,
    chart,
    result);
  input.focus();
  ctx.ready('sql');
  fillSqlHelpers(ctx, instanceSelect, examples, input);
}

function sqlStatusText(shown, res) {
  const rows = `${fmtNum(shown)} ${shown === 1 ? 'row' : 'rows'}`;
  const more = res.truncated ? ' (truncated)' : '';
  return `${rows}${more} · ${fmtNum(res.elapsed_ms)} ms`;
}

// Fills the instance choice and example queries from /api/overview (best effort).
async function fillSqlHelpers(ctx, instanceSelect, examples, input) {
  let ov;
  try { ov = await api('/api/overview'); } catch (_) { ov = { instances: [], timeseries: [] }; }
  if (!ctx.alive) return;
  for (const inst of ov.instances || []) instanceSelect.append(h('option', { value: inst.name }, inst.name));
  instanceSelect.value = sqlState.instance;

  const samples = ['SHOW DATABASES'];
  const db = (ov.timeseries || []).find((d) => (d.tables || []).length);
  if (db) {
    const t = db.tables[0];
    const q = `"${db.database}"."${t.name}"`;
    samples.push(`SHOW TABLES FROM "${db.database}"`, `DESCRIBE ${q}`,
      `SELECT * FROM ${q} WHERE time > ago(1h) ORDER BY time DESC LIMIT 100`);
  }
  const bt = (ov.instances || []).flatMap((i) => i.tables || [])[0];
  if (bt) {
    const name = /^[A-Za-z_][A-Za-z0-9_]*$/.test(bt.name) ? bt.name : `\`${bt.name}\``;
    samples.push(`SELECT _key, _timestamp FROM ${name} LIMIT 10`);
  }
  append(examples, [h('span', { class: 'muted' }, 'Examples: '),
    samples.map((s) => h('button', { type: 'button', class: 'link', onclick: () => { input.value = s; input.focus(); } }, s))]);
}

function cellText(value) {
  if (value === null || value === undefined) return null;
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

function resultTable(columns, rows) {
  const numeric = columns.map((c) => c.type === 'number');
  const body = document.createDocumentFragment();
  for (const row of rows) {
    const tr = document.createElement('tr');
    columns.forEach((_, i) => {
      const td = document.createElement('td');
      const text = cellText(row[i]);
      if (text === null) { td.textContent = 'NULL'; td.className = 'null'; } else td.textContent = text;
      if (numeric[i]) td.classList.add('num');
      tr.append(td);
    });
    body.append(tr);
  }
  return h('table', { id: 'sql-result', class: 'grid' },
    h('thead', {}, h('tr', {}, columns.map((c) => h('th', { title: c.type, class: c.type === 'number' ? 'num' : null }, c.name)))),
    h('tbody', {}, body));
}

const SQL_MAX_SERIES = 50;

// Aligned uPlot data for a result with a timestamp column and number columns: one series per
// number column per distinct combination of the string columns. Returns null when not chartable.
function sqlChartData(columns, rows) {
  const ti = columns.findIndex((c) => c.type === 'timestamp');
  const numbers = columns.map((c, i) => (c.type === 'number' ? i : -1)).filter((i) => i >= 0);
  const strings = columns.map((c, i) => (c.type === 'string' ? i : -1)).filter((i) => i >= 0);
  if (ti < 0 || !numbers.length) return null;

  const points = [];
  const groups = new Set();
  for (const row of rows) {
    const t = parseTimestamp(row[ti]);
    if (t == null) continue;
    const group = strings.map((i) => cellText(row[i]) ?? 'NULL').join(' · ');
    groups.add(group);
    points.push({ t: t / 1000, group, row });
  }
  if (!points.length) return null;

  const times = [...new Set(points.map((p) => p.t))].sort((a, b) => a - b);
  const timeIndex = new Map(times.map((t, i) => [t, i]));
  const groupList = [...groups].sort();
  const series = [];
  for (const ni of numbers) {
    for (const group of groupList) {
      const label = !strings.length ? columns[ni].name
        : numbers.length === 1 ? group : `${columns[ni].name} · ${group}`;
      series.push({ label, ni, group, values: new Array(times.length).fill(null) });
    }
  }
  const byKey = new Map(series.map((s) => [s.ni + '\u0000' + s.group, s]));
  for (const p of points) {
    for (const ni of numbers) {
      const v = p.row[ni];
      if (v == null || v === '') continue;
      byKey.get(ni + '\u0000' + p.group).values[timeIndex.get(p.t)] = Number(v);
    }
  }
  return { times, series, total: series.length };
}

// Draws the SQL result's line chart into `el` (left hidden when the result is not chartable).
// Returns the uPlot instance, or null.
function drawSqlChart(el, columns, rows) {
  const data = sqlChartData(columns, rows);
  if (!data) return null;
  const shown = data.series.slice(0, SQL_MAX_SERIES);
  el.hidden = false;
  if (data.total > shown.length) {
    el.append(h('p', { class: 'muted' }, `Showing the first ${shown.length} of ${data.total} series.`));
  }
  const holder = h('div');
  el.append(holder);
  const plot = lineChart(holder, { series: shown, height: 300 });
  plot.setData([data.times, ...shown.map((s) => s.values)]);
  return plot;
}

// ---------------------------------------------------------------------------
// Key Visualizer component (#/keyvis and embedded in table views)
// ---------------------------------------------------------------------------

const KV_METRICS = ['writes', 'reads', 'bytes_written', 'bytes_read', 'rows_scanned'];
const KV_WINDOWS = [
  [15 * 60000, 'last 15 min'], [3600000, 'last 1 h'], [6 * 3600000, 'last 6 h'],
  [24 * 3600000, 'last 24 h'], [3 * 86400000, 'last 3 days'],
];
const KV_MARGIN = { left: 190, right: 12, top: 4, bottom: 26 };
const KV_GRID_HEIGHT = 480;

// Colour ramp from dark (0) through purple, red and orange to yellow and white (1).
const KV_STOPS = [
  [0, [14, 17, 33]], [0.2, [72, 22, 110]], [0.45, [178, 42, 86]],
  [0.7, [245, 125, 30]], [0.88, [252, 220, 60]], [1, [255, 255, 220]],
];

function rampColor(f) {
  const x = Math.min(1, Math.max(0, f));
  for (let i = 1; i < KV_STOPS.length; i++) {
    const [p1, c1] = KV_STOPS[i];
    const [p0, c0] = KV_STOPS[i - 1];
    if (x <= p1) {
      const k = (x - p0) / (p1 - p0);
      return c0.map((c, j) => Math.round(c + (c1[j] - c) * k));
    }
  }
  return KV_STOPS[KV_STOPS.length - 1][1];
}

// Fraction of the colour ramp for value v of max, on a linear or square-root scale.
function rampFraction(v, max, scale) {
  if (!(max > 0) || !(v > 0)) return 0;
  const f = Math.min(1, v / max);
  return scale === 'sqrt' ? Math.sqrt(f) : f;
}

// Shortens text with an ellipsis until it fits maxWidth on the canvas context g.
function fitText(g, text, maxWidth) {
  if (g.measureText(text).width <= maxWidth) return text;
  let lo = 0;
  let hi = text.length;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (g.measureText(text.slice(0, mid) + '…').width <= maxWidth) lo = mid;
    else hi = mid - 1;
  }
  return text.slice(0, lo) + '…';
}

function metricValueText(metric, v) {
  return metric.startsWith('bytes') ? `${fmtNum(v)} (${fmtBytes(v)})` : fmtNum(v);
}

function keyvisComponent(ctx, ov, initial, opts) {
  const st = {
    target: initial, metric: 'writes', windowMs: 3600000, scale: 'sqrt',
    zoom: { lo: null, hi: null, from: null, to: null },
    data: null, layout: null, seq: 0, drag: null,
  };

  const tableSel = tableSelect('kv-table', ov, initial, (t) => {
    st.target = t;
    clearZoom();
    if (opts.route) replaceRoute(`#/${opts.route}/${targetValue(t)}`);
    reload();
  });
  const metricSel = selectOf('kv-metric', KV_METRICS.map((m) => [m, m]), st.metric, (m) => { st.metric = m; reload(); });
  const windowSel = selectOf('kv-window', KV_WINDOWS, st.windowMs, (v) => {
    st.windowMs = Number(v);
    st.zoom.from = st.zoom.to = null;
    reload();
  });
  const scaleSel = selectOf('kv-scale', [['sqrt', 'square root'], ['linear', 'linear']], st.scale, (v) => {
    st.scale = v;
    draw();
  });
  const resetBtn = h('button', { id: 'kv-reset', type: 'button', onclick: () => { clearZoom(); reload(); } }, 'Reset zoom');
  const zoomInfo = h('span', { class: 'kv-zoom muted' });
  const status = h('div', { class: 'kv-status' });
  const canvas = h('canvas', { id: 'kv-canvas', width: 300, height: 60, role: 'img', 'aria-label': 'Key Visualizer heatmap' });
  const selBox = h('div', { class: 'kv-sel', hidden: true });
  const tooltip = h('div', { id: 'kv-tooltip', hidden: true });
  const stage = h('div', { class: 'kv-stage' }, canvas, selBox, tooltip);
  const legend = h('div', { class: 'kv-legend' });
  const el = h('section', { class: 'keyvis' },
    h('div', { class: 'toolbar' },
      field('Table', tableSel), field('Metric', metricSel), field('Window', windowSel),
      field('Scale', scaleSel), resetBtn, zoomInfo),
    status, stage, legend,
    h('p', { class: 'hint muted' }, 'Drag down across rows (or click a row) to zoom into key ranges; drag across columns to zoom into a time span.'));

  function clearZoom() {
    st.zoom = { lo: null, hi: null, from: null, to: null };
  }

  // Fetches the heatmap for the current state; resolves true when its answer was drawn.
  async function load() {
    const mine = ++st.seq;
    const now = Date.now();
    const params = {
      ...targetParams(st.target), metric: st.metric,
      from: st.zoom.from ?? now - st.windowMs, to: st.zoom.to ?? now,
      lo: st.zoom.lo, hi: st.zoom.hi,
    };
    let data;
    try {
      data = await api(query('/api/keyvis', params));
    } catch (err) {
      if (mine !== st.seq || !ctx.alive) return false;
      st.data = null;
      status.replaceChildren(errorBox(err.message));
      legend.replaceChildren();
      canvas.hidden = true;
      return true;
    }
    if (mine !== st.seq || !ctx.alive) return false;
    st.data = data;
    window.almanacKeyvis = data;
    syncMetrics(data);
    status.replaceChildren();
    if (!data.total) status.append(h('p', { class: 'kv-empty muted' }, 'no activity recorded in this window'));
    canvas.hidden = false;
    draw();
    zoomInfo.textContent = zoomText();
    return true;
  }

  function reload() {
    ctx.unready();
    hideTooltip();
    load().then((drawn) => { if (drawn) ctx.ready(opts.readyName); });
  }

  // Lists the metrics the server offers, keeping the chosen one.
  function syncMetrics(data) {
    const metrics = data.metrics && data.metrics.length ? data.metrics : KV_METRICS;
    const listed = [...metricSel.options].map((o) => o.value);
    if (listed.join() !== metrics.join()) {
      metricSel.replaceChildren(...metrics.map((m) => h('option', { value: m }, m)));
    }
    metricSel.value = data.metric || st.metric;
  }

  function zoomText() {
    const parts = [];
    if (st.zoom.lo != null || st.zoom.hi != null) {
      const first = st.data && st.data.ranges[0];
      const last = st.data && st.data.ranges[st.data.ranges.length - 1];
      parts.push(`keys ${first ? first.start || '(start)' : '…'} – ${last ? last.end || '(end)' : '…'}`);
    }
    if (st.zoom.from != null) {
      parts.push(`${fmtDateTime(st.zoom.from)} – ${fmtClock(st.zoom.to)} UTC`);
    }
    return parts.length ? 'Zoomed: ' + parts.join(' · ') : '';
  }

  // Draws the heatmap, its axes and legend, and publishes the grid layout.
  function draw() {
    const d = st.data;
    if (!d) return;
    const rows = d.ranges.length;
    const cols = d.times.length;
    const M = KV_MARGIN;
    const avail = Math.max(360, stage.clientWidth || el.clientWidth || 800) - M.left - M.right;
    let cellW = cols ? avail / cols : 0;
    if (cellW >= 1) cellW = Math.floor(cellW);
    const cellH = rows ? Math.max(2, Math.min(28, Math.floor(KV_GRID_HEIGHT / rows))) : 0;
    const gridW = cellW * cols;
    const gridH = cellH * rows;
    canvas.width = Math.ceil(M.left + Math.max(gridW, 60) + M.right);
    canvas.height = M.top + Math.max(gridH, 20) + M.bottom;
    canvas.style.width = canvas.width + 'px';
    canvas.style.height = canvas.height + 'px';

    const g = canvas.getContext('2d', { willReadFrequently: true });
    g.clearRect(0, 0, canvas.width, canvas.height);
    paintCells(g, d, { x0: M.left, y0: M.top, gridW, gridH });
    g.strokeStyle = '#888';
    g.lineWidth = 1;
    g.strokeRect(M.left - 0.5, M.top - 0.5, gridW + 1, gridH + 1);
    drawKeyLabels(g, d, M.left, M.top, cellH);
    drawTimeLabels(g, d, M.left, M.top + gridH, cellW);

    st.layout = { x0: M.left, y0: M.top, cellW, cellH, rows, cols };
    window.almanacKeyvisLayout = { x0: M.left, y0: M.top, cellW, cellH };
    drawLegend(d);
  }

  // One pixel per cell in an offscreen canvas, scaled up without smoothing.
  function paintCells(g, d, { x0, y0, gridW, gridH }) {
    const rows = d.ranges.length;
    const cols = d.times.length;
    if (!rows || !cols) return;
    const off = document.createElement('canvas');
    off.width = cols;
    off.height = rows;
    const oc = off.getContext('2d');
    const img = oc.createImageData(cols, rows);
    const lut = Array.from({ length: 256 }, (_, i) => rampColor(i / 255));
    for (let r = 0; r < rows; r++) {
      const line = d.values[r] || [];
      for (let t = 0; t < cols; t++) {
        const f = rampFraction(line[t] || 0, d.max, st.scale);
        const c = lut[Math.round(f * 255)];
        const o = (r * cols + t) * 4;
        img.data[o] = c[0]; img.data[o + 1] = c[1]; img.data[o + 2] = c[2]; img.data[o + 3] = 255;
      }
    }
    oc.putImageData(img, 0, 0);
    g.imageSmoothingEnabled = false;
    g.drawImage(off, x0, y0, gridW, gridH);
  }

  // Range start keys along the left, spaced at least 14 px apart.
  function drawKeyLabels(g, d, x0, y0, cellH) {
    const every = Math.max(1, Math.ceil(14 / cellH));
    g.font = '11px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace';
    g.fillStyle = '#333';
    g.textAlign = 'right';
    g.textBaseline = 'middle';
    for (let r = 0; r < d.ranges.length; r += every) {
      const label = fitText(g, d.ranges[r].start || '(start)', x0 - 12);
      const y = y0 + r * cellH + Math.min(cellH / 2, 7);
      g.fillText(label, x0 - 8, y);
      g.fillRect(x0 - 5, Math.round(y0 + r * cellH), 4, 1);
    }
  }

  // Times along the bottom at round intervals, "HH:MM" (UTC), with the date over long spans.
  function drawTimeLabels(g, d, x0, yBase, cellW) {
    const times = d.times;
    if (!times.length) return;
    const step = d.step_ms || 60000;
    const long = times[times.length - 1] - times[0] + step > 86400000;
    const minGapMs = ((long ? 110 : 70) / Math.max(cellW, 1e-6)) * step;
    const nice = [1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440, 2880, 10080].map((m) => m * 60000);
    const interval = nice.find((n) => n >= minGapMs && n % step === 0);
    let marks = interval ? times.map((t, i) => i).filter((i) => times[i] % interval === 0) : [];
    if (!marks.length) {
      const every = Math.max(1, Math.ceil(minGapMs / step));
      marks = times.map((t, i) => i).filter((i) => i % every === 0);
    }
    g.font = '11px system-ui, sans-serif';
    g.fillStyle = '#333';
    g.textBaseline = 'top';
    for (const i of marks) {
      const x = x0 + i * cellW;
      if (x > canvas.width - 48) continue;
      const text = long ? fmtDateTime(times[i]).slice(5) : fmtClock(times[i], step < 60000);
      g.fillRect(Math.round(x), yBase + 1, 1, 4);
      g.textAlign = x - x0 < 20 ? 'left' : 'center';
      g.fillText(text, x, yBase + 7);
    }
    g.textAlign = 'right';
    g.fillStyle = '#777';
    g.fillText('UTC', canvas.width - 2, yBase + 7);
  }

  function drawLegend(d) {
    const stops = Array.from({ length: 11 }, (_, i) => {
      const [r, gg, b] = rampColor(rampFraction(i / 10, 1, st.scale) || 0);
      return `rgb(${r},${gg},${b}) ${i * 10}%`;
    });
    legend.replaceChildren(
      h('span', {}, '0'),
      h('span', { class: 'kv-ramp', style: `background: linear-gradient(to right, ${stops.join(', ')})` }),
      h('span', {}, metricValueText(d.metric, d.max)),
      h('span', { class: 'muted' },
        ` ${d.metric} per ${fmtDuration(d.step_ms)} step · ${st.scale === 'sqrt' ? 'square-root' : 'linear'} scale · total ${metricValueText(d.metric, d.total)}`));
  }

  // The canvas position of a mouse event.
  function pointer(e) {
    const rect = canvas.getBoundingClientRect();
    return { x: e.clientX - rect.left, y: e.clientY - rect.top };
  }

  // The cell under a canvas position (clamped to the grid when `clamp`), or null.
  function cellAt(p, clamp) {
    const L = st.layout;
    if (!L || !L.rows || !L.cols) return null;
    let t = Math.floor((p.x - L.x0) / L.cellW);
    let r = Math.floor((p.y - L.y0) / L.cellH);
    if (clamp) {
      t = Math.min(L.cols - 1, Math.max(0, t));
      r = Math.min(L.rows - 1, Math.max(0, r));
    } else if (t < 0 || r < 0 || t >= L.cols || r >= L.rows) {
      return null;
    }
    return { r, t };
  }

  function showTooltip(cell, p) {
    const d = st.data;
    const range = d.ranges[cell.r];
    const time = d.times[cell.t];
    const value = (d.values[cell.r] || [])[cell.t] || 0;
    const withSeconds = d.step_ms < 60000;
    tooltip.replaceChildren(
      h('dl', {},
        h('dt', {}, 'start'), h('dd', {}, range.start ? mono(range.start) : h('span', { class: 'muted' }, 'start of table')),
        h('dt', {}, 'end'), h('dd', {}, range.end ? mono(range.end) : h('span', { class: 'muted' }, 'end of table')),
        h('dt', {}, 'prefix'), h('dd', {}, range.prefix ? mono(range.prefix) : h('span', { class: 'muted' }, 'none')),
        h('dt', {}, 'time'), h('dd', {}, `${fmtDateTime(time, withSeconds)} – ${fmtClock(time + d.step_ms, withSeconds)} UTC`),
        h('dt', {}, d.metric), h('dd', { class: 'value' }, metricValueText(d.metric, value))));
    tooltip.hidden = false;
    const stageW = stage.clientWidth;
    const tipW = tooltip.offsetWidth;
    const left = p.x + 16 + tipW > stageW ? Math.max(0, p.x - 16 - tipW) : p.x + 16;
    tooltip.style.left = left + 'px';
    tooltip.style.top = (p.y + 16) + 'px';
  }

  function hideTooltip() {
    tooltip.hidden = true;
  }

  // Shows the band a drag would zoom into: rows when the drag is mostly vertical, else columns.
  function dragBand(start, p) {
    const L = st.layout;
    const a = start.cell;
    const b = cellAt(p, true);
    const vertical = Math.abs(p.y - start.y) >= Math.abs(p.x - start.x);
    if (vertical) {
      const r0 = Math.min(a.r, b.r);
      const r1 = Math.max(a.r, b.r);
      return { vertical, r0, r1, box: [L.x0, L.y0 + r0 * L.cellH, L.cols * L.cellW, (r1 - r0 + 1) * L.cellH] };
    }
    const t0 = Math.min(a.t, b.t);
    const t1 = Math.max(a.t, b.t);
    return { vertical, t0, t1, box: [L.x0 + t0 * L.cellW, L.y0, (t1 - t0 + 1) * L.cellW, L.rows * L.cellH] };
  }

  function zoomRows(r0, r1) {
    const ranges = st.data.ranges;
    st.zoom.lo = ranges[r0].start_b64 || null;
    st.zoom.hi = ranges[r1].end_b64 || null;
    reload();
  }

  function zoomTimes(t0, t1) {
    const d = st.data;
    st.zoom.from = d.times[t0];
    st.zoom.to = d.times[t1] + d.step_ms;
    reload();
  }

  function onDragMove(e) {
    const band = dragBand(st.drag, pointer(e));
    const [x, y, w, hh] = band.box;
    Object.assign(selBox.style, { left: x + 'px', top: y + 'px', width: w + 'px', height: hh + 'px' });
    selBox.hidden = false;
  }

  function onDragEnd(e) {
    const start = st.drag;
    stopDrag();
    if (!start || !st.data) return;
    const p = pointer(e);
    if (Math.abs(p.x - start.x) < 5 && Math.abs(p.y - start.y) < 5) {
      zoomRows(start.cell.r, start.cell.r);
      return;
    }
    const band = dragBand(start, p);
    if (band.vertical) zoomRows(band.r0, band.r1);
    else zoomTimes(band.t0, band.t1);
  }

  function stopDrag() {
    st.drag = null;
    selBox.hidden = true;
    window.removeEventListener('mousemove', onDragMove);
    window.removeEventListener('mouseup', onDragEnd);
  }

  canvas.addEventListener('mousedown', (e) => {
    if (e.button !== 0 || !st.data) return;
    const p = pointer(e);
    const cell = cellAt(p, false);
    if (!cell) return;
    e.preventDefault();
    hideTooltip();
    st.drag = { x: p.x, y: p.y, cell };
    window.addEventListener('mousemove', onDragMove);
    window.addEventListener('mouseup', onDragEnd);
  });
  canvas.addEventListener('mousemove', (e) => {
    if (st.drag || !st.data) return;
    const p = pointer(e);
    const cell = cellAt(p, false);
    if (cell) showTooltip(cell, p);
    else hideTooltip();
  });
  canvas.addEventListener('mouseleave', hideTooltip);

  let resizeTimer = null;
  const onResize = () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(draw, 150);
  };
  window.addEventListener('resize', onResize);
  ctx.onLeave(() => {
    stopDrag();
    clearTimeout(resizeTimer);
    window.removeEventListener('resize', onResize);
  });

  return { el, load };
}

// Key Visualizer view (#/keyvis, #/keyvis/bt/INSTANCE/TABLE, #/keyvis/ts/DB/TABLE).
async function keyvisView(ctx, tgt) {
  const ov = await api('/api/overview');
  if (!ctx.alive) return;
  ctx.add(h('h1', {}, 'Key Visualizer'),
    h('p', { class: 'muted' }, 'Activity per key range (rows) over time (columns). Brighter is busier.'));
  const chosen = tgt || firstTarget(ov);
  if (!chosen) {
    ctx.add(h('p', { class: 'muted' }, 'No tables yet.'));
    ctx.ready('keyvis');
    return;
  }
  const kv = keyvisComponent(ctx, ov, chosen, { readyName: 'keyvis', route: 'keyvis' });
  ctx.add(kv.el);
  if (await kv.load()) ctx.ready('keyvis');
}

// ---------------------------------------------------------------------------
// Schema advisor component (#/advisor and embedded in table views)
// ---------------------------------------------------------------------------

function lintComponent(ctx, ov, initial, opts) {
  let tgt = initial;
  let seq = 0;
  const tableSel = tableSelect('lint-table', ov, initial, (t) => {
    tgt = t;
    if (opts.route) replaceRoute(`#/${opts.route}/${targetValue(t)}`);
    ctx.unready();
    load().then((drawn) => { if (drawn) ctx.ready(opts.readyName); });
  });
  const out = h('div', { id: 'lint-findings' });
  const el = h('section', { class: 'advisor' }, h('div', { class: 'toolbar' }, field('Table', tableSel)), out);

  // Fetches and shows the findings; resolves true when its answer was drawn.
  async function load() {
    const mine = ++seq;
    let res;
    try {
      res = await api(query('/api/lint', targetParams(tgt)));
    } catch (err) {
      if (mine !== seq || !ctx.alive) return false;
      out.replaceChildren(errorBox(err.message));
      return true;
    }
    if (mine !== seq || !ctx.alive) return false;
    out.replaceChildren(...renderFindings(res));
    return true;
  }

  return { el, load };
}

function renderFindings(res) {
  const findings = res.findings || [];
  const checked = res.checked || [];
  const ruleList = checked.map((r, i) => [i ? ', ' : '', mono(r)]);
  if (!findings.length) {
    return [h('p', { id: 'lint-clean' },
      `No findings: ${checked.length} ${checked.length === 1 ? 'check' : 'checks'} passed`,
      checked.length ? [' (', ruleList, ')'] : null, '.')];
  }
  return [
    ...findings.map(findingCard),
    h('p', { class: 'muted checked' }, `${checked.length} checks run: `, ruleList),
  ];
}

function findingCard(f) {
  return h('div', { class: 'finding', 'data-rule': f.rule, 'data-severity': f.severity },
    h('div', { class: 'finding-head' },
      h('span', { class: 'badge' }, f.severity),
      h('span', { class: 'title' }, f.title),
      h('code', { class: 'rule' }, f.rule)),
    h('div', { class: 'evidence' }, f.evidence),
    h('div', { class: 'fix' }, f.fix),
    h('div', { class: 'guide' }, f.guide));
}

// Advisor view (#/advisor, #/advisor/bt/INSTANCE/TABLE, #/advisor/ts/DB/TABLE).
async function advisorView(ctx, tgt) {
  const ov = await api('/api/overview');
  if (!ctx.alive) return;
  ctx.add(h('h1', {}, 'Schema advisor'),
    h('p', { class: 'muted' }, 'Checks a table\'s row keys and schema against known pitfalls.'));
  const chosen = tgt || firstTarget(ov);
  if (!chosen) {
    ctx.add(h('p', { class: 'muted' }, 'No tables yet.'));
    ctx.ready('advisor');
    return;
  }
  const lint = lintComponent(ctx, ov, chosen, { readyName: 'advisor', route: 'advisor' });
  ctx.add(lint.el);
  if (await lint.load()) ctx.ready('advisor');
}

// ---------------------------------------------------------------------------
// Metrics (#/metrics)
// ---------------------------------------------------------------------------

const METRICS_POLL_MS = 2000;
const METRICS_HISTORY_MS = 10 * 60000;

// One chart per entry; `rate` series plot per-second differences of counters, others the values.
const METRIC_CHARTS = [
  { name: 'requests', title: 'Requests and errors per second', series: [
    { key: 'requests', label: 'requests/s', rate: true }, { key: 'errors', label: 'errors/s', rate: true }] },
  { name: 'rows', title: 'Rows read and written per second', series: [
    { key: 'rows_read', label: 'read/s', rate: true }, { key: 'rows_written', label: 'written/s', rate: true }] },
  { name: 'bytes', title: 'Bytes read and written per second', format: fmtBytes, series: [
    { key: 'bytes_read', label: 'read/s', rate: true }, { key: 'bytes_written', label: 'written/s', rate: true }] },
  { name: 'points', title: 'Points ingested and rejected per second', series: [
    { key: 'points_ingested', label: 'ingested/s', rate: true }, { key: 'points_rejected', label: 'rejected/s', rate: true }] },
  { name: 'storage', title: 'Memtable, journal and disk bytes', format: fmtBytes, series: [
    { key: 'memtable_bytes', label: 'memtable' }, { key: 'journal_bytes', label: 'journal' }, { key: 'disk_bytes', label: 'disk' }] },
  { name: 'open_connections', title: 'Open connections', series: [
    { key: 'open_connections', label: 'connections' }] },
];

// Samples of /api/stats, oldest first; kept across visits to the view.
const metricsHistory = [];

function recordSample(s) {
  const last = metricsHistory[metricsHistory.length - 1];
  if (last && s.time_ms <= last.time_ms) return;
  metricsHistory.push(s);
  while (metricsHistory.length && metricsHistory[0].time_ms < s.time_ms - METRICS_HISTORY_MS) metricsHistory.shift();
}

// uPlot data for one chart from the history: x in seconds, rates per second between samples.
function metricSeriesData(spec) {
  const xs = metricsHistory.map((s) => s.time_ms / 1000);
  const ys = spec.series.map(({ key, rate }) => metricsHistory.map((s, i) => {
    if (!rate) return s[key] ?? null;
    if (i === 0) return null;
    const prev = metricsHistory[i - 1];
    const dt = (s.time_ms - prev.time_ms) / 1000;
    const dv = (s[key] ?? 0) - (prev[key] ?? 0);
    return dt > 0 && dv >= 0 ? dv / dt : null;
  }));
  return [xs, ...ys];
}

function latestText(spec, data) {
  const fmt = spec.format || fmtNum;
  return spec.series.map((s, i) => {
    const v = data[i + 1][data[i + 1].length - 1];
    return `${s.label} ${v == null ? '–' : fmt(v)}`;
  }).join(' · ');
}

function metricsView(ctx) {
  const errorSlot = h('div');
  const grid = h('div', { id: 'metrics-charts' });
  ctx.add(
    h('h1', {}, 'Metrics'),
    h('p', { class: 'muted' }, `Polled every ${METRICS_POLL_MS / 1000} s; the last 10 minutes are kept while the console is open. Times in UTC. Raw Prometheus text: `,
      h('a', { href: '/metrics', target: '_blank', rel: 'noopener' }, '/metrics'), '.'),
    errorSlot, grid);

  const charts = METRIC_CHARTS.map((spec) => {
    const latest = h('span', { class: 'latest muted' });
    const body = h('div', { class: 'chart-body' });
    const el = h('div', { class: 'chart', 'data-metric': spec.name },
      h('div', { class: 'chart-title' }, h('span', {}, spec.title), latest), body);
    grid.append(el);
    return { spec, el: body, latest, plot: null };
  });

  let timer = null;
  let first = true;
  ctx.onLeave(() => {
    clearTimeout(timer);
    for (const c of charts) if (c.plot) c.plot.destroy();
  });
  fitChartsOnResize(ctx, () => charts);

  const redraw = () => {
    for (const c of charts) {
      if (!c.plot) c.plot = lineChart(c.el, { series: c.spec.series, format: c.spec.format, height: 180, live: false });
      const data = metricSeriesData(c.spec);
      c.plot.setData(data);
      c.latest.textContent = latestText(c.spec, data);
    }
  };

  const poll = async () => {
    try {
      const s = await api('/api/stats');
      if (!ctx.alive) return;
      recordSample(s);
      errorSlot.replaceChildren();
      redraw();
    } catch (err) {
      if (!ctx.alive) return;
      errorSlot.replaceChildren(errorBox(err.message));
    }
    if (first) { first = false; ctx.ready('metrics'); }
    timer = setTimeout(poll, METRICS_POLL_MS);
  };
  poll();
}

// ---------------------------------------------------------------------------
// Start
// ---------------------------------------------------------------------------

window.addEventListener('hashchange', navigate);
navigate();
