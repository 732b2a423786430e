/* blocklab report: draws the charts from the JSON each page embeds. No network. */
"use strict";
(function () {
  const COLORSCALE = "Viridis";
  const CP_FILL = { time: "rgba(31,119,180,0.16)", wal: "rgba(255,127,14,0.24)", other: "rgba(127,127,127,0.18)" };
  const CONFIG = { responsive: true, displaylogo: false, showLink: false, showSendToCloud: false };

  // The page's data: JSON in the page, or (run pages) JSON gzip-compressed in base64
  // (blocklab/report/pagedata.py, pack), unpacked here: no fetch, so from file:// too.
  async function pageData() {
    const packed = document.getElementById("page-data-gz");
    if (packed) return withBase(await unpack(packed.textContent.trim()));
    const el = document.getElementById("page-data");
    return el ? JSON.parse(el.textContent) : null;
  }

  async function unpack(base64) {
    const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
    const text = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(text).text());
  }

  // A run page's details that its variant's runs share (provenance, settings) are its
  // variant's first run's, in details.js beside it (window.blocklabDetails, packed once a
  // variant); the page holds what differs from them (pagedata.py, _details).
  async function withBase(d) {
    const x = d && d.details;
    if (!x || !x.base) return d;
    const packed = (window.blocklabDetails || {})[x.base];
    const base = packed ? await unpack(packed) : {};
    for (const [name, diff] of Object.entries(x.differs || {})) x[name] = patched(base[name], diff);
    delete x.base;
    delete x.differs;
    return d;
  }

  // `base` made into the object `diff` describes (pagedata.py, differences).
  function patched(base, diff) {
    const out = Object.assign({}, base || {}, diff.changed || {});
    for (const key of diff.removed || []) delete out[key];
    for (const [key, sub] of Object.entries(diff.patched || {})) out[key] = patched(out[key], sub);
    return out;
  }

  function fmt(x) {
    if (x === null || x === undefined || !isFinite(x)) return "–";
    const a = Math.abs(x);
    if (a >= 1000) return Math.round(x).toLocaleString("en-US");
    if (a >= 100) return x.toFixed(1);
    if (a >= 1) return x.toFixed(2);
    if (a === 0) return "0";
    return x.toPrecision(3);
  }

  function emptyMessage(div, text) {
    div.innerHTML = "";
    const p = document.createElement("div");
    p.className = "empty";
    p.textContent = text;
    div.appendChild(p);
  }

  function option(select, value, text, selected) {
    const o = document.createElement("option");
    o.value = value;
    o.textContent = text;
    if (selected) o.selected = true;
    select.appendChild(o);
  }

  // ---- cells: variants on two axes -------------------------------------------------

  function determined(variants, dim, by) {
    const seen = new Map();
    for (const v of variants) {
      const key = by.map((b) => String(v.dims[b])).join("\u0001");
      const val = String(v.dims[dim]);
      if (!seen.has(key)) seen.set(key, val);
      else if (seen.get(key) !== val) return false;
    }
    return true;
  }

  // The dimensions besides the axes that must be fixed to get one variant per cell
  // (the same rule as blocklab.report.shape.free_dims).
  function freeDims(variants, dimNames, axes) {
    const used = axes.filter((a) => a);
    const rest = dimNames.filter((k) => !used.includes(k));
    const order = rest.slice().sort((a, b) => (a === "storage" ? 0 : 1) - (b === "storage" ? 0 : 1));
    for (const dim of order) {
      const others = used.concat(rest.filter((k) => k !== dim));
      if (determined(variants, dim, others)) rest.splice(rest.indexOf(dim), 1);
    }
    return rest;
  }

  // A dimension's value as the pages print it, in its unit ("4 kB" for 4 and for 4096).
  function dimLabel(exp, dim, value) {
    const labels = (exp.dimLabels || {})[dim] || {};
    return labels[value] !== undefined ? labels[value] : value;
  }

  function matches(v, filters) {
    return Object.keys(filters).every((k) => String(v.dims[k]) === String(filters[k]));
  }

  // z, hover text and links for a heatmap; rows follow y, columns follow x.
  function cellMatrix(exp, x, y, filters, metric) {
    const xs = x ? exp.dimValues[x].map(String) : [""];
    const ys = y ? exp.dimValues[y].map(String) : [""];
    const z = ys.map(() => xs.map(() => null));
    const hover = ys.map(() => xs.map(() => "no variant"));
    const links = ys.map(() => xs.map(() => null));
    const m = exp.metrics.find((k) => k.key === metric) || { label: metric, unit: "" };
    for (const v of exp.variants) {
      if (!matches(v, filters)) continue;
      const i = y ? ys.indexOf(String(v.dims[y])) : 0;
      const j = x ? xs.indexOf(String(v.dims[x])) : 0;
      if (i < 0 || j < 0 || links[i][j]) continue;
      links[i][j] = v.href;
      const s = v.stats[metric];
      if (!s) { hover[i][j] = v.label + "<br>no successful run"; continue; }
      z[i][j] = s.mean;
      hover[i][j] = cellHover(v, s, m);
    }
    const xl = xs.map((s) => (x ? dimLabel(exp, x, s) : s));
    const yl = ys.map((s) => (y ? dimLabel(exp, y, s) : s));
    return { xs, ys, xl, yl, z, hover, links };
  }

  function cellHover(v, s, m) {
    let t = "<b>" + v.label + "</b><br>" + m.label + ": " + fmt(s.mean) + (m.unit ? " " + m.unit : "");
    t += s.lo !== null ? "<br>95 % CI " + fmt(s.lo) + " – " + fmt(s.hi) : "<br>no CI (n < 2)";
    t += "<br>n = " + s.n;
    if (s.vs !== null && s.vs !== undefined) {
      t += "<br>against the reference " + s.vs;
      t += "<br>" + s.verdict;
    } else if (v.ref) t += "<br>reference";
    if (s.noisy) t += "<br>noisy";
    return t + "<br><i>click for its runs</i>";
  }

  function heatTrace(cm, m, zmin, zmax, showscale) {
    return {
      type: "heatmap", x: cm.xl, y: cm.yl, z: cm.z,
      customdata: cm.hover, hovertemplate: "%{customdata}<extra></extra>",
      text: cm.z.map((row) => row.map((v) => (v === null ? "" : fmt(v)))), texttemplate: "%{text}", colorscale: COLORSCALE, zmin: zmin, zmax: zmax, xgap: 2, ygap: 2,
      showscale: showscale,
      colorbar: { title: { text: m.label + (m.unit ? " (" + m.unit + ")" : ""), side: "right" } },
    };
  }

  function finite(zs) {
    const out = [];
    for (const row of zs) for (const v of row) if (v !== null && isFinite(v)) out.push(v);
    return out;
  }

  function onCellClick(div, cm) {
    div.on("plotly_click", (ev) => {
      const p = ev.points[0];
      let i = 0, j = 0;
      if (Array.isArray(p.pointIndex)) { i = p.pointIndex[0]; j = p.pointIndex[1]; } else { j = p.pointIndex; }
      const href = cm.links[i] && cm.links[i][j];
      if (href) window.location.href = href;
    });
  }

  function drawCells(div, exp, x, y, filters, metric, scale) {
    const cm = cellMatrix(exp, x, y, filters, metric);
    cm.metric = metric;
    const m = exp.metrics.find((k) => k.key === metric) || { label: metric, unit: "" };
    const vals = finite(cm.z);
    if (!vals.length) { emptyMessage(div, "no value of " + m.label + " here"); return null; }
    const zmin = scale ? scale.zmin : Math.min(...vals);
    const zmax = scale ? scale.zmax : Math.max(...vals);
    const layout = { margin: { l: 80, r: 20, t: 10, b: 60 }, hovermode: "closest",
      xaxis: { type: "category", title: { text: x || "" } },
      yaxis: { type: "category", title: { text: y || "" } } };
    div.innerHTML = "";
    if (!y) {
      // One dimension: each variant's change against the reference with its CI, against
      // no change (a forest plot), not a colour scale that paints any gap full width.
      const rows = forestRows(exp, cm);
      if (!rows.length) { emptyMessage(div, "no ratio to the reference for " + m.label + ": the table below has the differences"); return cm; }
      forestPlot(div, rows, exp.equivalence_pct || 2, m.label + ": change against the reference (95 % CI)");
      return cm;
    }
    const trace = heatTrace(cm, m, zmin, zmax, scale ? scale.showscale : true);
    Plotly.newPlot(div, [trace], layout, CONFIG);
    onCellClick(div, cm);
    return cm;
  }


  // ---- forest plots: changes in % with their 95 % CI, against no change -------------

  const VERDICT_COLOR = { "v-faster": "#1e7b34", "v-slower": "#b3261e", "v-equal": "#1f5fa8",
    "v-undecided": "#8a5a00", "v-none": "#66707a" };

  // The css class of a verdict's words (blocklab.analysis.metrics.verdict_text).
  function verdictCss(word) {
    const w = (word || "").split(",")[0];
    if (w === "faster" || w === "better") return "v-faster";
    if (w === "slower" || w === "worse") return "v-slower";
    if (w.startsWith("equal")) return "v-equal";
    if (w === "undecided") return "v-undecided";
    return "v-none";
  }

  function alpha(hex, a) {
    const n = parseInt((hex || "#7f7f7f").slice(1), 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + a + ")";
  }

  // rows: {label, pct, lo, hi, text, word, css, href}; the first row on top.
  function forestPlot(div, rows, eq, xTitle) {
    const colour = rows.map((r) => VERDICT_COLOR[r.css] || "#333");
    const trace = { type: "scatter", mode: "markers+text", x: rows.map((r) => r.pct), y: rows.map((r) => r.label),
      text: rows.map((r) => r.text + (r.word ? "   " + r.word : "")), textposition: "top center",
      textfont: { size: 11, color: colour }, cliponaxis: false,
      marker: { size: 11, symbol: "diamond", color: colour }, customdata: rows.map((r) => r.href || ""),
      hovertemplate: "%{y}<br>%{text}<extra></extra>",
      error_x: { type: "data", symmetric: false, visible: true, color: "#333", thickness: 1.6, width: 7,
        array: rows.map((r) => (r.hi === null ? 0 : r.hi - r.pct)),
        arrayminus: rows.map((r) => (r.lo === null ? 0 : r.pct - r.lo)) } };
    // from the lowest to the highest end of a CI, no change and the band always inside
    const lows = [-eq * 1.6], highs = [eq * 1.6];
    for (const r of rows) { lows.push(r.lo === null ? r.pct : r.lo); highs.push(r.hi === null ? r.pct : r.hi); }
    const lo = Math.min(...lows.filter(isFinite)), hi = Math.max(...highs.filter(isFinite));
    const pad = (hi - lo) * 0.08;
    const shapes = [
      { type: "rect", xref: "x", yref: "paper", x0: -eq, x1: eq, y0: 0, y1: 1, layer: "below",
        fillcolor: "rgba(31,95,168,0.10)", line: { width: 0 } },
      { type: "line", xref: "x", yref: "paper", x0: 0, x1: 0, y0: 0, y1: 1, line: { color: "#333", width: 1.5 } }];
    const notes = [{ xref: "x", yref: "paper", x: 0, y: 1, yanchor: "bottom", showarrow: false,
      text: "no change", font: { size: 10, color: "#333" } }];
    Plotly.newPlot(div, [trace], { margin: { l: 20, r: 30, t: 22, b: 48 }, showlegend: false,
      hovermode: "closest", shapes: shapes, annotations: notes,
      xaxis: { title: { text: xTitle }, zeroline: false, range: [lo - pad, hi + pad], ticksuffix: " %" },
      yaxis: { type: "category", autorange: "reversed", automargin: true } }, CONFIG);
    onClickHref(div);
  }

  function onClickHref(div) {
    div.on("plotly_click", (ev) => {
      const h = ev.points[0] && ev.points[0].customdata;
      if (h) window.location.href = h;
    });
  }

  // One dimension's variants as forest rows (the reference at no change).
  function forestRows(exp, cm) {
    const rows = [];
    cm.xs.forEach((_, j) => {
      const href = cm.links[0][j];
      const v = exp.variants.find((w) => w.href === href);
      const s = v && v.stats[cm.metric];
      if (!v || !s) return;
      const pct = (x) => (x === null || x === undefined ? null : (x - 1) * 100);
      if (v.ref) rows.push({ label: cm.xl[j] + " (reference)", pct: 0, lo: null, hi: null, text: "reference", word: "", css: "v-none", href });
      else if (s.ratio !== null) rows.push({ label: cm.xl[j], pct: pct(s.ratio), lo: pct(s.rlo), hi: pct(s.rhi),
        text: s.vs, word: s.verdict, css: verdictCss(s.verdict), href });
    });
    return rows;
  }

  // ---- the answer and the rounds and runs behind it --------------------------------

  function simpleChart(id, traces, layout) {
    const div = document.getElementById(id);
    if (!div) return null;
    if (!traces.length) { emptyMessage(div, "nothing to draw"); return null; }
    Plotly.newPlot(div, traces, Object.assign({ margin: { l: 60, r: 10, t: 10, b: 45 }, hovermode: "closest",
      legend: { orientation: "h", y: -0.25 } }, layout), CONFIG);
    onClickHref(div);
    return div;
  }

  function initAnswer(d) {
    const a = d.answer;
    const forest = document.getElementById("forest");
    if (forest && a.forest.rows.length) {
      const rows = a.forest.rows.map((r) => Object.assign({}, r, { label: r.label + (r.reference ? " vs " + r.reference : "") }));
      forestPlot(forest, rows, a.forest.equivalence_pct, a.forest.metric + ": change against the reference (95 % CI)");
    }
    const p = window.blocklabPlots;  // plots.js beside the page: the rounds and runs
    if (!p) { for (const id of ["rounds-chart", "round-changes-chart", "spread-chart", "timeline-chart", "overlay-chart"]) {
      const div = document.getElementById(id); if (div) emptyMessage(div, "plots.js did not load"); } return; }
    p.variants = d.variants;
    const col = p.colors || {};
    const unit = p.rounds.unit;
    simpleChart("rounds-chart", p.rounds.values.filter((v) => v.points.length).map((v) => ({
      type: "scatter", mode: "lines+markers", name: v.label + (v.ref ? " (reference)" : ""),
      x: v.points.map((p) => p[0]), y: v.points.map((p) => p[1]),
      line: { color: col[v.label], width: v.ref ? 2.5 : 1.5 } })),
      { xaxis: { title: { text: "round" }, dtick: 1 }, yaxis: { title: { text: unit }, rangemode: "tozero" } });
    roundChanges(p.rounds.changes, col);
    runCharts(p, col);
    initOverlay(p, col);
    latencyChart(p.latency, col);
  }

  function roundChanges(changes, col) {
    const shapes = [{ type: "line", xref: "paper", x0: 0, x1: 1, y0: 0, y1: 0, line: { color: "#333", width: 1.2 } }];
    const bands = changes.length <= 4;
    for (const c of changes) {
      if (!bands || c.lo === null) continue;
      shapes.push({ type: "rect", xref: "paper", x0: 0, x1: 1, y0: c.lo, y1: c.hi, layer: "below",
        fillcolor: alpha(col[c.variant], 0.13), line: { width: 0 } });
      shapes.push({ type: "line", xref: "paper", x0: 0, x1: 1, y0: c.pct, y1: c.pct,
        line: { color: col[c.variant], width: 1.2, dash: "dash" } });
    }
    simpleChart("round-changes-chart", changes.map((c) => ({ type: "scatter", mode: "markers", name: c.label,
      x: c.points.map((p) => p[0]), y: c.points.map((p) => p[1]), marker: { size: 9, color: col[c.variant] },
      hovertemplate: "round %{x}: %{y:+.1f} %<br>overall " + c.pct.toFixed(1) + " %<extra>" + c.label + "</extra>" })),
      { xaxis: { title: { text: "round" }, dtick: 1 }, yaxis: { title: { text: "change, %" }, ticksuffix: " %" }, shapes });
  }

  function runCharts(d, col) {
    const groups = new Map();
    for (const v of d.variants) groups.set(v.label, []);
    for (const r of d.runs) { if (!groups.has(r.label)) groups.set(r.label, []); groups.get(r.label).push(r); }
    const named = [...groups].filter(([, runs]) => runs.length);
    const hover = (r) => "#" + r.id + " " + r.label + ", round " + r.round + ", position " + r.position;
    simpleChart("spread-chart", named.map(([label, runs]) => ({ type: "box", name: label, y: runs.map((r) => r.value),
      boxpoints: "all", jitter: 0.45, pointpos: 0, marker: { color: col[label], size: 7 }, line: { color: col[label] },
      text: runs.map(hover), customdata: runs.map((r) => r.href), hovertemplate: "%{text}<br>%{y:.1f}<extra></extra>" })),
      { showlegend: false, yaxis: { title: { text: d.rounds.unit } } });
    simpleChart("timeline-chart", named.map(([label, runs]) => ({ type: "scatter", mode: "markers", name: label,
      x: runs.map((r) => r.start), y: runs.map((r) => r.value), marker: { color: col[label], size: 8 },
      text: runs.map(hover), customdata: runs.map((r) => r.href), hovertemplate: "%{text}<br>%{y:.1f}<extra></extra>" })),
      { xaxis: { type: "date", title: { text: "run start (UTC)" } }, yaxis: { title: { text: d.rounds.unit } } });
  }

  // Per statistic the driver stored (average; p95, max, ... where it reports them), each
  // variant's runs as a box; the note says where the percentiles come from, or that none
  // exists (pgbench runs stored before its sampled per-transaction log).
  function latencyChart(lat, col) {
    const note = document.getElementById("latency-note");
    if (note) note.textContent = lat.percentiles ? "Percentiles as the driver reports them over each run; pgbench's from its per-transaction log, 10 % of the transactions sampled."
      : "No percentile is stored for these runs: pgbench runs made before its sampled per-transaction log have each run's average latency and its standard deviation only.";
    simpleChart("latency-chart", lat.variants.map((v) => ({ type: "box", name: v.label, x: v.x, y: v.y,
      boxpoints: "all", jitter: 0.3, pointpos: 0, marker: { color: col[v.label], size: 6 }, line: { color: col[v.label] } })),
      { boxmode: "group", xaxis: { type: "category", categoryorder: "array", categoryarray: lat.stats },
        yaxis: { title: { text: "ms" }, rangemode: "tozero" } });
  }

  function initOverlay(d, col) {
    const sel = document.getElementById("overlay-round");
    const div = document.getElementById("overlay-chart");
    if (!sel || !div) return;
    if (!d.overlay.order.length) {
      sel.parentElement.hidden = true;
      emptyMessage(div, "drawn for at most " + d.overlay_limit + " variants: grid.html has one chart per cell");
      return;
    }
    d.overlay.order.forEach((r, i) => option(sel, r, r, i === d.overlay.order.length - 1));
    function draw() {
      const runs = d.overlay.rounds[sel.value] || [];
      const ts = [].concat(...runs.map((r) => r.t));
      const tmin = Math.min(...ts), tmax = Math.max(...ts);
      const shapes = [];
      for (const r of runs) for (const c of r.checkpoints) {
        const x0 = Math.max(c.start === null ? tmin : c.start, tmin), x1 = Math.min(c.end === null ? tmax : c.end, tmax);
        if (x1 > x0) shapes.push({ type: "rect", xref: "x", yref: "paper", x0, x1, y0: 0, y1: 1, layer: "below",
          fillcolor: alpha(col[r.label], 0.10), line: { width: 0 } });
        if (c.start !== null && c.start >= tmin) shapes.push({ type: "line", xref: "x", yref: "paper", x0: c.start, x1: c.start,
          y0: 0, y1: 1, line: { color: col[r.label], width: 1.3, dash: "dash" } });
      }
      Plotly.react(div, runs.map((r) => ({ type: "scatter", mode: "lines", name: "#" + r.id + " " + r.label,
        x: r.t, y: r.v, line: { width: 1.3, color: col[r.label] } })),
        { margin: { l: 60, r: 10, t: 10, b: 45 }, hovermode: "x unified", legend: { orientation: "h", y: -0.25 },
          xaxis: { title: { text: "seconds into the run" }, range: [tmin, tmax] },
          yaxis: { title: { text: d.rounds.unit }, rangemode: "tozero" }, shapes }, CONFIG);
    }
    sel.addEventListener("change", draw);
    draw();
  }

  // ---- experiment page -------------------------------------------------------------

  function initExperiment(d) {
    if (d.answer) initAnswer(d);
    const metricSel = document.getElementById("metric");
    const xSel = document.getElementById("axis-x");
    const ySel = document.getElementById("axis-y");
    const filtersEl = document.getElementById("filters");
    const div = document.getElementById("heatmap");
    const dims = Object.keys(d.dimValues);
    option(xSel, "", "(none)", !d.axes[0]);
    option(ySel, "", "(none)", !d.axes[1]);
    for (const k of dims) { option(xSel, k, k, k === d.axes[0]); option(ySel, k, k, k === d.axes[1]); }
    const filterValues = {};

    function drawFilters(free) {
      filtersEl.innerHTML = "";
      for (const k of free) {
        const label = document.createElement("label");
        label.textContent = k + " ";
        const sel = document.createElement("select");
        sel.dataset.dim = k;
        const vals = d.dimValues[k].map(String);
        if (!vals.includes(filterValues[k])) filterValues[k] = vals[0];
        for (const v of vals) option(sel, v, dimLabel(d, k, v), v === filterValues[k]);
        sel.addEventListener("change", () => { filterValues[k] = sel.value; redraw(); });
        label.appendChild(sel);
        filtersEl.appendChild(label);
      }
    }

    function redraw() {
      let x = xSel.value || null, y = ySel.value || null;
      if (x === y) y = null;
      if (!x && y) { x = y; y = null; }
      const free = freeDims(d.variants, dims, [x, y]);
      drawFilters(free);
      const filters = {};
      for (const k of free) filters[k] = filterValues[k];
      drawCells(div, d, x, y, filters, metricSel.value, null);
      for (const t of document.querySelectorAll("table.summary")) t.hidden = t.dataset.metric !== metricSel.value;
    }

    for (const s of [metricSel, xSel, ySel]) s.addEventListener("change", redraw);
    redraw();
  }

  // ---- compare page ----------------------------------------------------------------

  function initCompare(d) {
    const itemsEl = document.getElementById("compare-items");
    const metricSel = document.getElementById("compare-metric");
    const panels = document.getElementById("panels");
    const scaleEl = document.getElementById("compare-scale");
    const seen = new Set();
    for (const e of d.experiments) for (const m of e.metrics) {
      if (!seen.has(m.key)) { seen.add(m.key); option(metricSel, m.key, m.label + (m.unit ? " (" + m.unit + ")" : ""), m.key === "tps"); }
    }
    d.items.forEach((it, n) => {
      const label = document.createElement("label");
      const box = document.createElement("input");
      box.type = "checkbox";
      box.value = String(n);
      box.className = "compare-item";
      box.dataset.title = it.title;
      box.addEventListener("change", redraw);
      label.appendChild(box);
      label.appendChild(document.createTextNode(" " + it.title));
      itemsEl.appendChild(label);
    });

    function redraw() {
      const metric = metricSel.value;
      const ticked = [...itemsEl.querySelectorAll("input:checked")].map((b) => d.items[Number(b.value)]);
      panels.innerHTML = "";
      const mats = ticked.map((it) => {
        const exp = d.experiments[it.experiment];
        return { it, exp, cm: cellMatrix(exp, it.axes[0], it.axes[1], it.filters, metric) };
      });
      const all = [].concat(...mats.map((p) => finite(p.cm.z)));
      if (!ticked.length) { scaleEl.textContent = "Tick two or more items."; return; }
      if (!all.length) { scaleEl.textContent = "No ticked item has this metric."; return; }
      const scale = { zmin: Math.min(...all), zmax: Math.max(...all) };
      scaleEl.textContent = "One colour scale for all panels: " + fmt(scale.zmin) + " – " + fmt(scale.zmax) + ".";
      mats.forEach((p, n) => {
        const box = document.createElement("div");
        box.className = "panel";
        const h = document.createElement("h3");
        const a = document.createElement("a");
        a.href = p.exp.page;
        a.textContent = p.it.title;
        h.appendChild(a);
        const div = document.createElement("div");
        div.className = "chart";
        box.appendChild(h);
        box.appendChild(div);
        panels.appendChild(box);
        scale.showscale = n === mats.length - 1;
        drawCells(div, p.exp, p.it.axes[0], p.it.axes[1], p.it.filters, metric, scale);
      });
    }
    metricSel.addEventListener("change", redraw);
    redraw();
  }

  // ---- run page --------------------------------------------------------------------

  function xy(points, scale) {
    const s = scale || 1;
    return { x: points.map((p) => p[0]), y: points.map((p) => (p[1] === null ? null : p[1] / s)) };
  }

  function cpShapes(cps, tmin, tmax) {
    const out = [];
    for (const c of cps) {
      const x0 = Math.max(c.start_s === null ? tmin : c.start_s, tmin);
      const x1 = Math.min(c.end_s === null ? tmax : c.end_s, tmax);
      if (!(x1 > x0)) continue;
      out.push({ type: "rect", xref: "x", yref: "paper", x0, x1, y0: 0, y1: 1, layer: "below",
        fillcolor: CP_FILL[c.kind] || CP_FILL.other,
        line: c.incomplete ? { width: 1, dash: "dot", color: "#888" } : { width: 0 } });
    }
    return out;
  }

  function lineChart(id, traces, d, yaxis, notes) {
    const div = typeof id === "string" ? document.getElementById(id) : id;
    if (!div) return;
    const shown = traces.filter((t) => t && t.x.length);
    if (!shown.length) { emptyMessage(div, "not recorded in this run"); return; }
    // a note goes above the plot, left, where the toolbar (top right) does not cover it
    const noteLines = (notes || []).reduce((n, a) => n + a.text.split("<br>").length, 0);
    const top = noteLines ? 14 * noteLines + 8 : 10;
    const layout = { margin: { l: 60, r: 10, t: top, b: 40 }, hovermode: "x unified",
      legend: { orientation: "h", y: -0.2 }, xaxis: { title: { text: "seconds" }, range: [d.tmin, d.tmax] },
      yaxis: Object.assign({ rangemode: "tozero" }, yaxis || {}),
      shapes: cpShapes(d.checkpoints, d.tmin, d.tmax), annotations: notes || [] };
    Plotly.newPlot(div, shown, layout, CONFIG);
  }

  function line(points, name, extra, scale) {
    if (!points) return null;
    return Object.assign({ type: "scatter", mode: "lines", name: name }, xy(points, scale), extra || {});
  }

  // The probes keep what client backends flushed as they exited (after the last 1 Hz
  // sample) apart from the per-second line: "<counter>_final_flush", one amount, not a
  // rate (blocklab/probes/derived.py, build_series). It is never drawn as a point of a
  // line; the chart states it (the note blocklab/report/panels.py writes).
  function flushNote(text) {
    if (!text) return [];
    // one amount a line, above the plot at the left: clear of the toolbar (top right)
    const cut = text.indexOf(": ");
    const lines = cut < 0 ? text : text.slice(0, cut + 1) + "<br>" + text.slice(cut + 2).split(", ").join(",<br>");
    return [{ xref: "paper", yref: "paper", x: 0, y: 1, xanchor: "left", yanchor: "bottom",
      showarrow: false, align: "left", font: { size: 10, color: "#666" }, text: lines }];
  }

  // The panels and their charts come from blocklab/report/panels.py (labels, units, the
  // divisor of each chart's values); the throughput chart adds its moving average.
  // A series as [t, v] points: its values in columns at the seconds d.t, else its pairs
  // (blocklab/report/pagedata.py, run_json).
  function runPoints(d, key) {
    if (!key) return null;
    const v = (d.series || {})[key];
    if (v) return v.map((y, i) => [d.t[i], y]);
    return (d.pairs || {})[key] || null;
  }

  // The run page's sections, made here from its data so that the page holds each thing
  // once: the panels (blocklab/report/panels.py), the checkpoints, the stored details,
  // and its series as a CSV download. Text goes in as text (append), never as HTML.
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    e.append(...kids.filter((k) => k !== null && k !== undefined));
    return e;
  }

  function rawNames(items, labelled) {
    const d = el("details", { class: "raw-names" }, el("summary", null, "raw columns"));
    items.forEach((s, i) => {
      d.append(el("code", null, s.key));
      if (labelled) d.append(" " + s.label);
      if (i < items.length - 1) d.append(labelled ? "; " : ", ");
    });
    return d;
  }

  function namedList(items) {
    return items.flatMap((s, i) => [el("span", { title: s.key }, s.label), i < items.length - 1 ? ", " : null]);
  }

  function chartBox(c) {
    const unit = c.unit ? " (" + c.unit + ")" : "";
    const box = el("div", { class: "chart-box" },
      el("h3", { title: "columns: " + c.series.map((s) => s.key).join(", ") }, c.title + unit),
      el("div", { id: "chart-" + c.id, class: "chart" }));
    if (c.log_copy) {
      box.append(el("h3", null, c.title + ", log scale" + unit),
        el("div", { id: "chart-" + c.id + "-log", class: "chart" }));
    }
    box.append(rawNames(c.series, true));
    return box;
  }

  function panelSection(p) {
    const s = el("section", { class: "series-panel", id: "panel-" + p.id }, el("h2", null, p.title));
    if (p.charts.length) s.append(el("div", { class: "charts" }, ...p.charts.map(chartBox)));
    if (p.zero.length) {
      s.append(el("div", { class: "zero muted" }, "zero throughout: ", ...namedList(p.zero), " ",
        rawNames(p.zero, false)));
    }
    if (p.empty.length) s.append(el("p", { class: "no-value muted" }, "no value recorded: ", ...namedList(p.empty)));
    return s;
  }

  function swatch(kind) {
    return el("span", { class: "swatch cp-" + kind });
  }

  function checkpointTable(cps) {
    const num = { class: "num" };
    const row = (tag, cells) => el("tr", null, ...cells.map((c, i) => el(tag, i === 3 ? null : num, c)));
    const bytes = (x) => (Number.isInteger(x) ? x.toLocaleString("en-US") : fmt(x));
    return [el("h2", null, "Checkpoints"), el("table", { class: "data", id: "checkpoints" },
      el("thead", null, row("th", ["#", "start (s)", "end (s)", "trigger", "bytes written"])),
      el("tbody", null, ...cps.map((c, i) => row("td", [String(i + 1), fmt(c.start_s),
        c.end_s === null ? "still running" : fmt(c.end_s), c.trigger, bytes(c.bytes_written)]))))];
  }

  function runSections(d) {
    const box = document.getElementById("run-panels");
    if (box) {
      box.append(el("p", { class: "legend" }, "Checkpoints: ", swatch("time"),
        " time-triggered (checkpoint_timeout) ", swatch("wal"), " WAL-triggered or requested ",
        swatch("other"), " other (a dotted edge: still running when the run ended)"),
      ...(d.panels || []).map(panelSection), ...(d.checkpoints.length ? checkpointTable(d.checkpoints) : []));
    }
    const details = document.getElementById("run-details");
    const x = d.details || {};
    const pre = (summary, value, open) => el("details", open ? { open: "" } : null,
      el("summary", null, summary), el("pre", null, JSON.stringify(value, null, 1)));
    if (details) {
      details.append(pre("provenance", x.provenance, true), pre("variant definition", x.variant),
        pre("settings (" + Object.keys(x.settings || {}).length + ")", x.settings),
        pre("metrics (" + Object.keys(x.metrics || {}).length + ")", x.metrics));
    }
    const csv = document.getElementById("run-series-csv");
    if (csv) csv.href = URL.createObjectURL(new Blob([seriesCsv(d)], { type: "text/csv" }));
  }

  // The run's series as CSV: t_s, then a column a series (sorted by name), a line a second
  // (what `blocklab export` holds for the run, one column a series)
  function seriesCsv(d) {
    const cell = (x) => (/[",\r\n]/.test(x) ? '"' + x.replaceAll('"', '""') + '"' : x);
    const names = Object.keys(d.series).concat(Object.keys(d.pairs)).sort();
    const rows = new Map();
    names.forEach((name, i) => {
      for (const [t, v] of runPoints(d, name)) {
        if (!rows.has(t)) rows.set(t, new Array(names.length).fill(""));
        rows.get(t)[i] = v === null ? "" : String(v);
      }
    });
    const lines = [["t_s", ...names].map(cell).join(",")];
    for (const t of [...rows.keys()].sort((a, b) => a - b)) lines.push(t + "," + rows.get(t).join(","));
    return lines.join("\r\n") + "\r\n";
  }

  function initRun(d) {
    runSections(d);
    const thr = runPoints(d, d.throughput);
    const ma10 = thr && thr.map((p, i) => [p[0], d.ma10[i]]);
    for (const p of d.panels || []) {
      for (const c of p.charts) {
        const notes = flushNote(c.note);
        let traces;
        if (c.id === "tps") {
          traces = [line(thr, d.throughput_name || "tps", { line: { width: 1, color: "#9bb7d4" } }),
            line(ma10, "10-second moving average", { line: { width: 2.5, color: "#1f5fa8" } })];
        } else {
          traces = c.series.map((x) => line(runPoints(d, x.key), x.label, {}, c.scale));
        }
        lineChart("chart-" + c.id, traces, d, null, notes);
        if (c.log_copy) lineChart("chart-" + c.id + "-log", traces.map((t) => t && Object.assign({}, t)), d,
          { type: "log", rangemode: "normal" }, notes);
      }
    }
  }

  // ---- grid page -------------------------------------------------------------------

  // Each cell's lines are in a script next to the page (grid/cell-<n>.js) that assigns
  // window.blocklabGrid[n]: a <script src> loads from file:// where fetch() may not.
  function loadShard(src, n, done) {
    const el = document.createElement("script");
    el.src = src;
    el.onload = () => done((window.blocklabGrid || {})[n] || []);
    el.onerror = () => done(null);
    document.head.appendChild(el);
  }

  function drawGridCell(div, d, runs) {
    if (!runs || !runs.length) { emptyMessage(div, runs ? "no run" : "could not load this cell's runs"); return; }
    const traces = runs.map((r) => ({ type: "scatter", mode: "lines", name: "#" + r.id + " " + r.label,
      x: r.t, y: r.v, line: { width: 1, color: d.colors[r.label] }, hovertemplate: "#" + r.id + " %{y:.0f} " + (d.throughput_name || "tps") + "<extra></extra>" }));
    Plotly.newPlot(div, traces, { margin: { l: 40, r: 5, t: 5, b: 25 }, showlegend: false,
      yaxis: { range: [0, d.ymax] }, xaxis: { range: [d.tmin, d.tmax] } },
      { displayModeBar: false, responsive: true, staticPlot: false });
  }

  function initGrid(d, ready) {
    const grid = document.getElementById("grid");
    const xs = d.xs.length ? d.xs : [""];
    const ys = d.ys.length ? d.ys : [""];
    grid.style.gridTemplateColumns = "6em repeat(" + xs.length + ", minmax(220px, 1fr))";
    const head = (t) => { const h = document.createElement("div"); h.className = "head"; h.textContent = t; grid.appendChild(h); };
    let pending = 1;
    const finished = () => { pending -= 1; if (!pending) ready(); };
    head((d.y || "") + " \\ " + (d.x || ""));
    xs.forEach((x, j) => head(d.xl[j] !== undefined ? d.xl[j] : x));
    d.cells.forEach((cell, n) => { cell.n = n; });
    ys.forEach((y, i) => {
      head(d.yl[i] !== undefined ? d.yl[i] : y);
      xs.forEach((x) => {
        const cell = d.cells.find((c) => String(c.x) === x && String(c.y) === y);
        const box = document.createElement("div");
        box.className = "cell";
        const div = document.createElement("div");
        div.className = "chart";
        if (cell) {
          const a = document.createElement("a");
          a.href = cell.href;
          a.textContent = cell.title;
          a.className = "muted";
          box.appendChild(a);
        }
        box.appendChild(div);
        grid.appendChild(box);
        if (!cell || !cell.src) { emptyMessage(div, "no run"); return; }
        pending += 1;
        loadShard(cell.src, cell.n, (runs) => { drawGridCell(div, d, runs); finished(); });
      });
    });
    finished();
  }

  // ---- device profiles: value against request size, log axes -----------------------

  function initDevices(d) {
    const DASH = { 1: "solid", 32: "dash" };
    function draw(div, p, key, title) {
      const traces = p.lines.map((l) => ({ type: "scatter", mode: "lines+markers", name: l.name,
        x: l.kb, y: l[key], line: { dash: DASH[l.depth] || "dot" } }));
      if (!traces.length) { emptyMessage(div, "no successful point"); return; }
      Plotly.newPlot(div, traces, { margin: { l: 60, r: 10, t: 10, b: 40 },
        legend: { orientation: "h", y: -0.25 },
        xaxis: { type: "log", title: { text: "request size (kB)" }, tickvals: [1, 2, 4, 8, 16, 32, 64] },
        yaxis: { type: "log", title: { text: title } } }, CONFIG);
    }
    document.querySelectorAll(".chart-iops").forEach((div) =>
      draw(div, d.profiles[+div.dataset.profile], "iops", "IOPS"));
    document.querySelectorAll(".chart-lat").forEach((div) =>
      draw(div, d.profiles[+div.dataset.profile], "p99", "p99 latency (µs)"));
  }

  // ---- start -----------------------------------------------------------------------

  document.addEventListener("DOMContentLoaded", async () => {
    const page = document.body.dataset.page;
    const d = await pageData();
    if (!d || typeof Plotly === "undefined") return;
    const init = { experiment: initExperiment, compare: initCompare, run: initRun, grid: initGrid,
      devices: initDevices }[page];
    const ready = () => { document.body.dataset.ready = "1"; };
    if (init === initGrid) initGrid(d, ready);
    else { if (init) init(d); ready(); }
  });
})();
