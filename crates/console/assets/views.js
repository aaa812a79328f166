// Almanac console: the overview, table, SQL and schema-advisor views.
//
// views.js: the overview (#/), the Bigtable table view (#/table/...), the time-series
// table view (#/ts/...), SQL (#/sql, with its result chart), and the schema advisor
// component and view (#/advisor/...). Needs core.js and keyvis.js.
'use strict';

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
