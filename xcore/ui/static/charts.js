// xcore ui: the line and scatter charts, drawn with uPlot (vendored: uPlot.iife.min.js, MIT).
// uPlot writes labels as text (textContent or on the canvas), so store values need no escaping.
// A chart is made once per element and then given new data: a zoom (drag to zoom, double-click
// to reset) survives the page's live updates.
"use strict";

const STATUS_COLORS = {COMPLETED: "#2e7d32", FAILED: "#c62828", CANCELLED: "#757575", RUNNING: "#1565c0",
  PENDING: "#f9a825", LAUNCHING: "#8e24aa", UNKNOWN: "#6d4c41", QUEUED: "#bdbdbd"};
const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
  "#bcbd22", "#17becf"];

function alpha(color, a) {  // "#rrggbb" with an opacity
  return color + Math.round(a * 255).toString(16).padStart(2, "0");
}

// Make the chart in `element`, or give the one there new data. `key` names what the chart
// shows (its series and axes): when it changes the chart is made anew, else only the data
// changes. A zoom the user made is kept either way while `axes` (what the axes show) stay.
function chartIn(element, key, makeOptions, data, axes) {
  let plot = element.uplot;
  const kept = plot && plot.zoomed && plot.axesKey === (axes || key) ?
    {x: [plot.scales.x.min, plot.scales.x.max], y: [plot.scales.y.min, plot.scales.y.max]} : null;
  if (plot && plot.key === key) {
    plot.setData(data);
  } else {
    if (plot) plot.destroy();
    element.replaceChildren();
    const options = makeOptions(Math.max(element.clientWidth, 300));
    options.hooks = {setSelect: [(u) => { if (u.select.width > 0 || u.select.height > 0) u.zoomed = true; }]};
    plot = new window.uPlot(options, data, element);
    plot.key = key;
    plot.axesKey = axes || key;
    plot.over.addEventListener("dblclick", () => { plot.zoomed = false; });
    element.uplot = plot;
    if (!element.resizer) {  // the chart follows its box's width (boxes wrap and shrink)
      element.resizer = new ResizeObserver(() => {
        const width = Math.max(element.clientWidth, 300);
        if (element.uplot && Math.abs(element.uplot.width - width) > 1) {
          element.uplot.setSize({width, height: element.uplot.height});
        }
      });
      element.resizer.observe(element);
    }
  }
  plot.zoomed = Boolean(kept);
  if (kept) {
    plot.setScale("x", {min: kept.x[0], max: kept.x[1]});
    plot.setScale("y", {min: kept.y[0], max: kept.y[1]});
  }
  return plot;
}

function pointsOnly(label, color) {
  return {label, stroke: color, fill: alpha(color, 0.5), paths: () => null, points: {show: true, space: 0, size: 7,
    stroke: color, fill: alpha(color, 0.5)}};
}

// A result (y) against an argument (x) of every sampled trial, one series per status.
// chart: the chart endpoint's answer (columns of values).
function drawScatter(element, chart, x, y) {
  const points = [];
  const xs = chart.arg_values[x] || [], ys = chart.result_values[y] || [];
  for (let i = 0; i < chart.ids.length; i++) {
    if (typeof ys[i] !== "number" || xs[i] === undefined || xs[i] === null) continue;
    points.push([xs[i], ys[i], chart.status[i], chart.ids[i]]);
  }
  const numeric = points.length > 0 && points.every((p) => typeof p[0] === "number");
  const cats = numeric ? [] : [...new Set(points.map((p) => typeof p[0] === "string" ? p[0] : JSON.stringify(p[0])))].sort();
  if (!numeric) points.forEach((p) => { p[0] = cats.indexOf(typeof p[0] === "string" ? p[0] : JSON.stringify(p[0])); });
  const logX = numeric && points.length > 0 && points.every((p) => p[0] > 0) &&
    Math.max(...points.map((p) => p[0])) / Math.min(...points.map((p) => p[0])) >= 100;
  points.sort((a, b) => a[0] - b[0]);
  const statuses = Object.keys(STATUS_COLORS).filter((s) => points.some((p) => p[2] === s));
  const data = [points.map((p) => p[0]), ...statuses.map((s) => points.map((p) => p[2] === s ? p[1] : null))];
  const key = JSON.stringify([x, y, statuses, cats, logX]);
  element.dataset.points = String(points.length);
  element.scatter = points;  // [x, y, status, id] in data order: what a click looks up
  const plot = chartIn(element, key, (width) => ({
    width, height: 280,
    scales: {x: {time: false, distr: logX ? 3 : 1, ...(numeric ? {} : {range: () => [-0.5, cats.length - 0.5]})}},
    axes: [{label: x, ...(numeric ? {} : {splits: () => cats.map((_, i) => i),
      values: (u, splits) => splits.map((v) => cats[v] === undefined ? "" : cats[v])})}, {label: y}],
    series: [{label: x, value: (u, v) => v === null || v === undefined ? "--" : (numeric ? v : cats[v])},
      ...statuses.map((s) => pointsOnly(s.toLowerCase(), STATUS_COLORS[s] || "#333"))],
  }), data, JSON.stringify([x, y, cats, logX]));
  if (!plot.opensTrials) {  // a click on a point opens its trial
    plot.opensTrials = true;
    plot.over.addEventListener("click", (event) => {
      const id = pointAt(plot, element.scatter, event.offsetX, event.offsetY);
      if (id !== null && element.onTrial) element.onTrial(id);
    });
  }
  return plot;
}

// The trial of the point nearest (left, top) in the plotting area, within 8 pixels, or null.
function pointAt(plot, points, left, top) {
  let best = null, distance = 8;
  for (const [x, y, , id] of points) {
    const d = Math.hypot(plot.valToPos(x, "x") - left, plot.valToPos(y, "y") - top);
    if (d < distance) { distance = d; best = id; }
  }
  return best;
}

// Where a trial's point is drawn, in pixels from the plotting area's top left (for tests and tools).
function scatterPointOf(element, id) {
  const found = (element.scatter || []).find((p) => p[3] === id);
  return found ? {x: element.uplot.valToPos(found[0], "x"), y: element.uplot.valToPos(found[1], "y")} : null;
}

// How many trials were queued, running, completed and failed over time (counted on the server).
function drawTimeline(element, timeline) {
  const names = ["queued", "running", "completed", "failed"];
  const colors = [STATUS_COLORS.QUEUED, STATUS_COLORS.RUNNING, STATUS_COLORS.COMPLETED, STATUS_COLORS.FAILED];
  const data = [timeline.t, ...names.map((n) => timeline[n])];
  return chartIn(element, "timeline", (width) => ({
    width, height: 280, axes: [{}, {label: "work units"}],
    series: [{}, ...names.map((n, i) => ({label: n, stroke: colors[i], width: 2, paths: window.uPlot.paths.stepped({align: 1})}))],
  }), data);
}

// Learning curves: one line per trial (units: [{id, series: {name: [[step, value], ...]}}])
// and, for each group (groups: [{label, steps, mean, std}]), its mean with a ±1 std band.
function drawCurves(element, units, name, groups) {
  const lines = units.filter((u) => u.series[name]);
  const bands = (groups || []).filter((g) => g.steps.length);
  const tables = [...lines.map((u) => [u.series[name].map((p) => p[0]), u.series[name].map((p) => p[1])])];
  for (const g of bands) {
    tables.push([g.steps, g.mean]);
    tables.push([g.steps, g.mean.map((m, i) => m === null || g.std[i] === null ? m : m + g.std[i])]);
    tables.push([g.steps, g.mean.map((m, i) => m === null || g.std[i] === null ? m : m - g.std[i])]);
  }
  if (!tables.length) return null;
  const data = window.uPlot.join(tables);
  const series = [{label: "step"}, ...lines.map((u, i) => ({label: "WU " + u.id, stroke: bands.length ? "#b0bec5" :
    PALETTE[i % PALETTE.length], width: bands.length ? 1 : 1.5, spanGaps: true}))];
  const bandOptions = [];
  bands.forEach((g, i) => {
    const color = PALETTE[i % PALETTE.length], at = series.length;
    series.push({label: g.label + " (mean)", stroke: color, width: 2.5, spanGaps: true});
    series.push({label: g.label + " +std", stroke: alpha(color, 0.3), width: 0, spanGaps: true, points: {show: false}});
    series.push({label: g.label + " -std", stroke: alpha(color, 0.3), width: 0, spanGaps: true, points: {show: false}});
    bandOptions.push({series: [at + 1, at + 2], fill: alpha(color, 0.18)});
  });
  element.dataset.traces = String(lines.length);
  element.dataset.bands = String(bands.length);
  const key = JSON.stringify([name, series.map((s) => s.label)]);
  return chartIn(element, key, (width) => ({
    width, height: 300, scales: {x: {time: false}}, axes: [{label: "step"}, {label: name}], series, bands: bandOptions,
    legend: {show: series.length <= 16},
  }), data);
}

window.xcoreCharts = {drawScatter, drawTimeline, drawCurves, scatterPointOf, STATUS_COLORS, PALETTE};
