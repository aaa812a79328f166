// Almanac console: the Key Visualizer.
//
// keyvis.js: the Key Visualizer component (heatmap canvas, axes, legend, tooltip,
// drag-to-zoom; publishes window.almanacKeyvis and window.almanacKeyvisLayout), used
// embedded in the table views and by the Key Visualizer view (#/keyvis/...).
// Needs core.js.
'use strict';

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
