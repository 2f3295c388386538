// xcore ui: confirmations, live updates, charts and the log viewer. Every value from the
// store is put into the page as text (textContent) or escaped for Plotly's labels.
"use strict";

const COLORS = {COMPLETED: "#2e7d32", FAILED: "#c62828", CANCELLED: "#757575", RUNNING: "#1565c0",
  PENDING: "#f9a825", LAUNCHING: "#8e24aa", UNKNOWN: "#6d4c41", QUEUED: "#bdbdbd"};

function esc(value) {  // Plotly reads a few HTML tags in labels: show them as text instead
  return String(value).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function confirmForms(root) {
  root.querySelectorAll("form[data-confirm]").forEach((form) => {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  });
}

function countsInto(element, counts) {
  element.replaceChildren();
  for (const [status, n] of Object.entries(counts)) {
    const span = document.createElement("span");
    span.className = "count " + status;
    span.textContent = n + " " + status.toLowerCase();
    element.append(span, " ");
  }
}

async function getJSON(url) {
  const response = await fetch(url, {credentials: "same-origin"});
  if (!response.ok) throw new Error(url + ": " + response.status);
  return response.json();
}

// -- experiment page -----------------------------------------------------------------------

function drawPlot(chart) {
  const ySelect = document.getElementById("plot-y"), xSelect = document.getElementById("plot-x");
  const fill = (select, names) => {
    if (select.options.length === names.length) return;
    const keep = select.value;
    select.replaceChildren(...names.map((n) => new Option(n, n)));
    if (names.includes(keep)) select.value = keep;
  };
  fill(ySelect, chart.results);
  fill(xSelect, chart.args);
  const plot = document.getElementById("plot");
  if (!chart.results.length || !chart.args.length) {
    plot.textContent = chart.results.length ? "no arguments to plot against" :
      "no results yet: programs report them as XCORE_RESULT {\"name\": value} lines";
    return;
  }
  const y = ySelect.value, x = xSelect.value;
  const byStatus = {};
  for (const unit of chart.units) {
    const value = unit.results[y];
    if (value === undefined || value === null || !(x in unit.args)) continue;
    const arg = unit.args[x];
    const group = byStatus[unit.status] || (byStatus[unit.status] = {x: [], y: [], text: []});
    group.x.push(typeof arg === "number" ? arg : esc(typeof arg === "string" ? arg : JSON.stringify(arg)));
    group.y.push(value);
    group.text.push("WU " + unit.id);
  }
  const xs = Object.values(byStatus).flatMap((g) => g.x);
  const numeric = xs.length && xs.every((v) => typeof v === "number");
  const logX = numeric && xs.every((v) => v > 0) && Math.max(...xs) / Math.min(...xs) >= 100;
  const traces = Object.entries(byStatus).map(([status, g]) => ({
    type: "scatter", mode: "markers", name: status.toLowerCase(), x: g.x, y: g.y, text: g.text,
    marker: {color: COLORS[status] || "#333", size: 8}, hovertemplate: "%{text}<br>" + esc(x) + "=%{x}<br>" + esc(y) + "=%{y}<extra></extra>",
  }));
  window.Plotly.react(plot, traces, {
    margin: {t: 10, r: 10, b: 40, l: 50}, height: 280, xaxis: {title: {text: esc(x)}, type: logX ? "log" : (numeric ? "linear" : "category")},
    yaxis: {title: {text: esc(y)}}, showlegend: true, legend: {orientation: "h"},
  }, {displaylogo: false, responsive: true});
}

function drawTimeline(chart) {
  const element = document.getElementById("timeline");
  const now = Date.now() / 1000;
  const units = chart.units.slice(-2000);  // the newest 2000: a readable timeline
  const queued = {y: [], base: [], x: []};
  const byStatus = {};
  for (const unit of units) {
    const label = "WU " + unit.id;
    const start = unit.started === null ? null : unit.started;
    queued.y.push(label); queued.base.push(new Date(unit.created * 1000).toISOString());
    queued.x.push(((start === null ? (unit.ended === null ? now : unit.ended) : start) - unit.created) * 1000);
    if (start !== null) {
      const group = byStatus[unit.status] || (byStatus[unit.status] = {y: [], base: [], x: []});
      group.y.push(label); group.base.push(new Date(start * 1000).toISOString());
      group.x.push(((unit.ended === null ? now : unit.ended) - start) * 1000);
    }
  }
  const bar = (name, g, color) => ({type: "bar", orientation: "h", name, y: g.y, base: g.base, x: g.x,
    marker: {color}, hovertemplate: "%{y}: " + name + "<extra></extra>"});
  const traces = [bar("queued", queued, COLORS.QUEUED)];
  for (const [status, g] of Object.entries(byStatus)) traces.push(bar(status.toLowerCase(), g, COLORS[status] || "#333"));
  window.Plotly.react(element, traces, {
    barmode: "overlay", margin: {t: 10, r: 10, b: 55, l: 60}, height: 280, xaxis: {type: "date"},
    yaxis: {autorange: "reversed", type: "category", showticklabels: units.length <= 60}, legend: {orientation: "h"},
  }, {displaylogo: false, responsive: true});
}

// -- learning curves ------------------------------------------------------------------------

function drawCurves(units) {
  // units: [{id, series: {name: [[step, value], ...]}}]; one line per unit for the chosen name
  const select = document.getElementById("curve-name"), element = document.getElementById("curves");
  const names = [...new Set(units.flatMap((u) => Object.keys(u.series)))];
  if (!select || !element || !window.Plotly) return names.length;
  const keep = select.value;
  if (select.options.length !== names.length) {
    select.replaceChildren(...names.map((n) => new Option(n, n)));
    if (names.includes(keep)) select.value = keep;
  }
  const name = select.value;
  const traces = units.filter((u) => u.series[name]).map((u) => ({
    type: "scatter", mode: "lines", name: "WU " + u.id, x: u.series[name].map((p) => p[0]),
    y: u.series[name].map((p) => p[1]), hovertemplate: "WU " + u.id + "<br>step %{x}<br>" + esc(name) + "=%{y}<extra></extra>",
  }));
  window.Plotly.react(element, traces, {
    margin: {t: 10, r: 10, b: 40, l: 50}, height: 280, xaxis: {title: {text: "step"}},
    yaxis: {title: {text: esc(name)}}, showlegend: traces.length <= 12, legend: {orientation: "h"},
  }, {displaylogo: false, responsive: true});
  element.dataset.traces = String(traces.length);
  return names.length;
}

function embeddedCurves(script) {
  // the unit and compare pages: the series are in the page, as JSON (not run as script)
  const units = JSON.parse(script.textContent);  // [{id, series}], in the table's order
  const draw = () => drawCurves(units);
  document.getElementById("curve-name").addEventListener("change", draw);
  if (window.Plotly) draw(); else window.addEventListener("load", draw);
}

function ticked() {
  return [...document.querySelectorAll("input[name=unit][form=compare-form]:checked")].map((box) => box.value);
}

function experimentPage(section) {
  const id = section.dataset.id, poll = Number(section.dataset.poll) || 3000;
  let version = null;
  let chart = null;
  const redraw = () => { if (chart && window.Plotly) { drawPlot(chart); drawTimeline(chart); } };
  document.getElementById("plot-y").addEventListener("change", redraw);
  document.getElementById("plot-x").addEventListener("change", redraw);
  let curves = [];
  const box = document.getElementById("curves-box");
  const redrawCurves = () => { if (drawCurves(curves)) box.hidden = false; };
  const loadCurves = async () => {
    const query = new URLSearchParams(window.location.search);
    for (const unit of ticked()) query.append("unit", unit);
    const answer = await getJSON("/api/experiments/" + id + "/curves?" + query);
    curves = answer.units;
    if (answer.names.length) { box.hidden = false; redrawCurves(); }
  };
  document.getElementById("curve-name").addEventListener("change", redrawCurves);
  document.getElementById("units-table").addEventListener("change", (event) => {
    if (event.target.matches("input[name=unit]")) loadCurves().catch(console.warn);
  });
  const loadChart = async () => {
    chart = await getJSON("/api/experiments/" + id + "/chart"); redraw();
    await loadCurves();
  };
  const tick = async () => {
    try {
      const summary = await getJSON("/api/experiments/" + id + "/summary");
      const status = document.getElementById("status");
      status.textContent = summary.status;
      status.className = "status " + summary.status;
      countsInto(document.getElementById("counts"), summary.counts);
      if (version !== null && summary.version !== version) {
        const response = await fetch("/experiments/" + id + "/table" + window.location.search, {credentials: "same-origin"});
        if (response.ok) {
          const holder = document.getElementById("units-table");
          const keep = new Set(ticked());  // the ticks survive the table's refresh
          holder.innerHTML = await response.text();  // server-rendered, escaped by the template engine
          holder.querySelectorAll("input[name=unit]").forEach((tick) => { tick.checked = keep.has(tick.value); });
          confirmForms(holder);
        }
        await loadChart();
      }
      version = summary.version;
    } catch (error) {
      console.warn(error);
    }
    window.setTimeout(tick, poll);
  };
  loadChart().catch(console.warn);
  tick();
}

// -- work-unit page: the log ----------------------------------------------------------------

function logViewer(pre) {
  // The server sends whole lines from `offset` (colour codes removed, each `\r`-rewritten line
  // in its last state) and the unfinished last line as `partial`, shown until the next poll.
  const follow = document.getElementById("log-follow");
  const select = document.getElementById("log-job");
  const skipped = document.getElementById("log-skipped");
  const poll = Number(pre.dataset.poll) || 3000;
  let offset = 0, job = pre.dataset.job, timer = null, generation = 0;
  const partial = document.createElement("span");
  const reset = () => { pre.replaceChildren(partial); partial.textContent = ""; skipped.hidden = true; };
  const load = async () => {
    const mine = generation;
    try {
      const data = await getJSON(pre.dataset.url + "?" + new URLSearchParams({job, offset}));
      if (mine !== generation) return;
      const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      if (data.start !== offset) {  // more was written than is sent at once: the newest part only
        reset();
        skipped.hidden = false;
        document.getElementById("log-skipped-size").textContent = (data.start / 1048576).toFixed(1) + " MiB";
        document.getElementById("log-whole").href = pre.dataset.url + "?" + new URLSearchParams({job, whole: "1"});
      }
      partial.before(document.createTextNode(data.text));
      partial.textContent = data.partial || "";
      offset = data.offset;
      if (atBottom) pre.scrollTop = pre.scrollHeight;
      pre.dataset.done = data.done ? "1" : "0";
      if (!data.done && follow.checked) timer = window.setTimeout(load, poll);
    } catch (error) {
      partial.before(document.createTextNode("\n(" + error + ")\n"));
    }
  };
  follow.addEventListener("change", () => { window.clearTimeout(timer); if (follow.checked) load(); });
  if (select) select.addEventListener("change", () => {
    generation += 1; window.clearTimeout(timer); job = select.value; offset = 0; reset(); load();
  });
  reset();
  load();
}

document.addEventListener("DOMContentLoaded", () => {
  confirmForms(document);
  const section = document.getElementById("experiment");
  if (section) experimentPage(section);
  const pre = document.getElementById("log");
  if (pre) logViewer(pre);
  const series = document.getElementById("series-data");
  if (series) embeddedCurves(series);
});
