// Almanac console: the metrics view.
//
// metrics.js: the metrics view (#/metrics), which polls /api/stats, keeps the last
// ten minutes of samples and draws them with uPlot. Needs core.js.
'use strict';

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
