// xcore ui: parallel coordinates of a sweep's arguments and results, on one canvas.
// One vertical axis per argument and result, one line per trial, coloured by a chosen axis;
// failed trials grey and dashed; a missing value sits on the "n/a" row under its axis.
// Drag along an axis to keep only the lines through that range (click the axis to clear);
// click a line to open its trial. The colour choice and the ranges survive new data.
"use strict";

const PC = {left: 50, right: 50, top: 34, bottom: 38, missing: 16, height: 340};
const RAMP = ["#440154", "#3b528b", "#21918c", "#5ec962", "#fde725"];  // viridis, low to high

function rampColor(t) {
  const at = Math.min(Math.max(t, 0), 1) * (RAMP.length - 1), i = Math.min(Math.floor(at), RAMP.length - 2);
  const mix = (a, b) => Math.round(a + (b - a) * (at - i));
  const rgb = (hex) => [1, 3, 5].map((k) => parseInt(hex.slice(k, k + 2), 16));
  const [a, b] = [rgb(RAMP[i]), rgb(RAMP[i + 1])];
  return "rgb(" + a.map((v, k) => mix(v, b[k])).join(",") + ")";
}

// An axis over one column of values: numbers (log when positive over two decades) or categories.
function makeAxis(name, kind, values) {
  const present = values.filter((v) => v !== null && v !== undefined && !(typeof v === "number" && isNaN(v)));
  const numeric = present.length > 0 && present.every((v) => typeof v === "number");
  const text = (v) => typeof v === "string" ? v : JSON.stringify(v);
  if (!numeric) {
    const cats = [...new Set(present.map(text))].sort();
    const pos = (v) => cats.length <= 1 ? 0.5 : cats.indexOf(text(v)) / (cats.length - 1);
    return {name, kind, numeric, cats, values, at: (v) => (v === null || v === undefined) ? null : pos(v),
      ticks: cats.length <= 12 ? cats.map((c) => [pos(c), c]) : [[0, cats[0]], [1, cats[cats.length - 1]]]};
  }
  let lo = Math.min(...present), hi = Math.max(...present);
  const log = lo > 0 && hi / lo >= 100;
  const f = log ? Math.log10 : (v) => v;
  const [a, b] = [f(lo), f(hi)];
  const at = (v) => typeof v !== "number" || isNaN(v) ? null : (b === a ? 0.5 : (f(v) - a) / (b - a));
  const label = (v) => Number(v.toPrecision(3)).toString();
  return {name, kind, numeric, log, lo, hi, values, at, ticks: [[0, label(lo)], [1, label(hi)]]};
}

function parallelCoordinates(holder, onOpen) {
  const canvas = document.createElement("canvas");
  canvas.className = "parcoords";
  const note = document.createElement("p");
  note.className = "muted";
  holder.replaceChildren(canvas, note);
  const state = {chart: null, axes: [], colorBy: null, brushes: {}, drag: null, lines: []};
  const api = {canvas, state};

  const geometry = () => {
    const width = canvas.clientWidth || holder.clientWidth || 800;
    const n = state.axes.length;
    const xOf = (i) => PC.left + (n <= 1 ? 0 : i * (width - PC.left - PC.right) / (n - 1));
    const plotHeight = PC.height - PC.top - PC.bottom - PC.missing;
    const yOf = (t) => t === null ? PC.top + plotHeight + PC.missing : PC.top + (1 - t) * plotHeight;
    return {width, xOf, yOf, plotHeight};
  };

  const passes = (row) => state.axes.every((axis) => {
    const range = state.brushes[axis.name];
    if (!range) return true;
    const t = axis.at(axis.values[row]);
    return t !== null && t >= range[0] && t <= range[1];
  });

  const draw = () => {
    const chart = state.chart;
    if (!chart) return;
    const {width, xOf, yOf} = geometry();
    const ratio = window.devicePixelRatio || 1;
    canvas.width = width * ratio; canvas.height = PC.height * ratio;
    canvas.style.height = PC.height + "px";
    const ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, PC.height);
    const colour = state.axes.find((a) => a.name === state.colorBy) || state.axes[state.axes.length - 1];
    const order = chart.ids.map((_, row) => row);
    const failed = (row) => chart.status[row] === "FAILED";
    order.sort((a, b) => (failed(b) ? 1 : 0) - (failed(a) ? 1 : 0));  // failed ones first, under the rest
    state.lines = [];
    let dashed = 0, kept = 0;
    for (const row of order) {
      const on = passes(row);
      const ys = state.axes.map((axis) => yOf(axis.at(axis.values[row])));
      state.lines.push({row, on, ys});
      if (!on) continue;
      kept += 1;
      ctx.beginPath();
      ys.forEach((y, i) => (i ? ctx.lineTo(xOf(i), y) : ctx.moveTo(xOf(i), y)));
      if (failed(row)) {
        dashed += 1;
        ctx.setLineDash([5, 4]); ctx.strokeStyle = "rgba(120,120,120,0.55)"; ctx.lineWidth = 1.2;
      } else {
        const t = colour ? colour.at(colour.values[row]) : null;
        ctx.setLineDash([]); ctx.strokeStyle = t === null ? "rgba(160,160,160,0.5)" : rampColor(t);
        ctx.globalAlpha = chart.ids.length > 500 ? 0.35 : 0.75; ctx.lineWidth = 1.2;
      }
      ctx.stroke();
      ctx.globalAlpha = 1;
    }
    ctx.setLineDash([]);
    ctx.font = "12px system-ui, sans-serif";
    ctx.textAlign = "center";
    state.axes.forEach((axis, i) => {
      const x = xOf(i);
      ctx.strokeStyle = "#37474f"; ctx.lineWidth = 1;
      ctx.beginPath(); ctx.moveTo(x, yOf(1)); ctx.lineTo(x, yOf(0)); ctx.stroke();
      ctx.fillStyle = axis.kind === "result" ? "#1565c0" : "#222";
      ctx.fillText(axis.name + (axis.log ? " (log)" : ""), x, PC.top - 16);
      ctx.fillStyle = "#546e7a";
      for (const [t, label] of axis.ticks) ctx.fillText(String(label).slice(0, 14), x, yOf(t) + (t === 0 ? 12 : -4));
      ctx.fillText("n/a", x, yOf(null) + 12);
      const range = state.brushes[axis.name];
      if (range) {
        ctx.fillStyle = "rgba(255,193,7,0.35)"; ctx.strokeStyle = "#ff8f00";
        ctx.fillRect(x - 7, yOf(range[1]), 14, yOf(range[0]) - yOf(range[1]));
        ctx.strokeRect(x - 7, yOf(range[1]), 14, yOf(range[0]) - yOf(range[1]));
      }
    });
    canvas.dataset.lines = String(kept);
    canvas.dataset.failed = String(dashed);
    const brushed = Object.keys(state.brushes).length;
    note.textContent = (chart.ids.length < chart.total ? "an even sample of " + chart.ids.length + " of " + chart.total +
      " trials; " : "") + (brushed ? kept + " of " + chart.ids.length + " lines in the marked ranges (click an axis to clear)"
      : "drag along an axis to keep a range; click a line to open its trial; failed trials are grey and dashed");
  };

  const where = (event) => {
    const box = canvas.getBoundingClientRect();
    return [event.clientX - box.left, event.clientY - box.top];
  };
  const axisNear = (x) => {
    const {xOf} = geometry();
    return state.axes.findIndex((_, i) => Math.abs(xOf(i) - x) <= 6);
  };
  const toFraction = (y) => {
    const {yOf, plotHeight} = geometry();
    return Math.min(Math.max((yOf(0) - y) / plotHeight, 0), 1);
  };
  // The trial whose line passes nearest (x, y), within 6 pixels, among those shown.
  const lineAt = (x, y) => {
    const {xOf} = geometry();
    const n = state.axes.length;
    let best = null, distance = 6;
    for (const line of state.lines) {
      if (!line.on) continue;
      for (let i = 0; i < n; i++) {
        const x0 = xOf(i), x1 = xOf(Math.min(i + 1, n - 1));
        if (x < x0 - 3 || (i < n - 1 && x > x1)) continue;
        const t = x1 === x0 ? 0 : Math.min(Math.max((x - x0) / (x1 - x0), 0), 1);
        const yAt = line.ys[i] + t * (line.ys[Math.min(i + 1, n - 1)] - line.ys[i]);
        if (Math.abs(yAt - y) < distance) { distance = Math.abs(yAt - y); best = line; }
        break;
      }
    }
    return best === null ? null : state.chart.ids[best.row];
  };

  canvas.addEventListener("mousedown", (event) => {
    const [x, y] = where(event);
    const axis = axisNear(x);
    if (axis >= 0) { state.drag = {axis, from: y}; event.preventDefault(); }
  });
  canvas.addEventListener("mousemove", (event) => {
    const [x, y] = where(event);
    if (state.drag) {
      const name = state.axes[state.drag.axis].name;
      const [a, b] = [toFraction(state.drag.from), toFraction(y)];
      if (Math.abs(y - state.drag.from) >= 3) { state.brushes[name] = [Math.min(a, b), Math.max(a, b)]; draw(); }
      return;
    }
    const id = axisNear(x) >= 0 ? null : lineAt(x, y);
    canvas.title = id === null ? "" : "WU " + id;
    canvas.style.cursor = axisNear(x) >= 0 ? "ns-resize" : (id === null ? "default" : "pointer");
  });
  window.addEventListener("mouseup", (event) => {
    if (!state.drag) return;
    const [, y] = where(event);
    const name = state.axes[state.drag.axis].name;
    if (Math.abs(y - state.drag.from) < 3) { delete state.brushes[name]; draw(); }  // a click clears the range
    state.drag = null;
  });
  canvas.addEventListener("click", (event) => {
    const [x, y] = where(event);
    if (axisNear(x) >= 0) return;
    const id = lineAt(x, y);
    if (id !== null) onOpen(id);
  });
  window.addEventListener("resize", draw);

  // New data (the chart endpoint's answer); the colour choice and marked ranges are kept.
  api.update = (chart) => {
    state.chart = chart;
    state.axes = [...chart.args.map((n) => makeAxis(n, "arg", chart.arg_values[n])),
      ...chart.results.map((n) => makeAxis(n, "result", chart.result_values[n]))];
    for (const name of Object.keys(state.brushes)) if (!state.axes.some((a) => a.name === name)) delete state.brushes[name];
    draw();
  };
  api.colorBy = (name) => { state.colorBy = name; draw(); };
  // Where the lines shown pass, `fraction` of the way from axis `axisIndex` to the next, in
  // pixels from the canvas's top left: [[id, x, y], ...] (for tests and tools).
  api.points = (axisIndex, fraction) => {
    const {xOf} = geometry();
    const next = Math.min(axisIndex + 1, state.axes.length - 1);
    const x = xOf(axisIndex) + fraction * (xOf(next) - xOf(axisIndex));
    return state.lines.filter((l) => l.on).map((l) => [state.chart.ids[l.row], x,
      l.ys[axisIndex] + fraction * (l.ys[next] - l.ys[axisIndex])]);
  };
  api.pointOf = (id, axisIndex) => {
    const found = api.points(axisIndex, 0).find((p) => p[0] === id);
    return found ? {x: found[1], y: found[2]} : null;
  };
  holder.parcoords = api;
  return api;
}

window.xcoreParcoords = {parallelCoordinates};
