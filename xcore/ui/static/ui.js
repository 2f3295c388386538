// xcore ui: confirmations, live updates, the log viewer, and the charts' wiring (charts.js and
// parcoords.js draw them, loaded only on pages that show one). Every value from the store is
// put into the page as text (textContent), or drawn on a canvas.
"use strict";

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

function fillSelect(select, names) {
  const keep = select.value;
  if (select.options.length === names.length && [...select.options].every((o, i) => o.value === names[i])) return;
  select.replaceChildren(...names.map((n) => new Option(n, n)));
  if (names.includes(keep)) select.value = keep;
}

function drawPlot(chart) {
  const ySelect = document.getElementById("plot-y"), xSelect = document.getElementById("plot-x");
  fillSelect(ySelect, chart.results);
  fillSelect(xSelect, chart.args);
  const plot = document.getElementById("plot");
  if (!chart.results.length || !chart.args.length) {
    plot.textContent = chart.results.length ? "no arguments to plot against" :
      "no results yet: programs report them as XCORE_RESULT {\"name\": value} lines";
    return;
  }
  window.xcoreCharts.drawScatter(plot, chart, xSelect.value, ySelect.value);
}

// -- learning curves ------------------------------------------------------------------------

function drawCurves(units, groups) {
  // units: [{id, series: {name: [[step, value], ...]}}]; groups: {name: [{label, steps, mean, std}]}
  const select = document.getElementById("curve-name"), element = document.getElementById("curves");
  const names = [...new Set(units.flatMap((u) => Object.keys(u.series)))];
  if (!select || !element || !window.xcoreCharts) return names.length;
  fillSelect(select, names);
  window.xcoreCharts.drawCurves(element, units, select.value, (groups || {})[select.value]);
  return names.length;
}

function embeddedCurves(script) {
  // the unit and compare pages: the series are in the page, as JSON (not run as script)
  const units = JSON.parse(script.textContent);  // [{id, series}], in the table's order
  const draw = () => drawCurves(units);
  document.getElementById("curve-name").addEventListener("change", draw);
  draw();
}

function ticked() {
  return [...document.querySelectorAll("input[name=unit][form=compare-form]:checked")].map((box) => box.value);
}

// The grouped table's ▸ opens a group in place: its trials (the first page of them) under its
// row, from the same table the page shows filtered to the group. Open groups stay open when
// the table is refreshed.
function groupRows(holder, id) {
  const open = new Set();
  const expand = async (row) => {
    const query = new URLSearchParams(window.location.search);
    query.delete("group_by"); query.delete("page");
    query.set("where", row.dataset.where);
    const response = await fetch("/experiments/" + id + "/table?" + query, {credentials: "same-origin"});
    if (!response.ok) return;
    const page = document.createElement("template");
    page.innerHTML = await response.text();  // server-rendered, escaped by the template engine
    const units = page.content.getElementById("units");
    if (!units || !row.isConnected) return;
    units.removeAttribute("id");
    units.className = "members";
    const members = document.createElement("tr");
    members.className = "members";
    const cell = document.createElement("td");
    cell.colSpan = row.children.length;
    const more = page.content.getElementById("matching");
    cell.append(units);
    if (more) { more.removeAttribute("id"); cell.append(more); }
    members.append(cell);
    row.after(members);
    confirmForms(members);
  };
  const toggle = (row, opening) => {
    const button = row.querySelector("button.expand");
    button.setAttribute("aria-expanded", String(opening));
    button.textContent = opening ? "▾" : "▸";
    if (opening) { open.add(row.dataset.where); expand(row).catch(console.warn); return; }
    open.delete(row.dataset.where);
    if (row.nextElementSibling && row.nextElementSibling.classList.contains("members")) row.nextElementSibling.remove();
  };
  holder.addEventListener("click", (event) => {
    const button = event.target.closest("button.expand");
    if (button) toggle(button.closest("tr.group"), button.getAttribute("aria-expanded") !== "true");
  });
  return () => holder.querySelectorAll("tr.group").forEach((row) => { if (open.has(row.dataset.where)) toggle(row, true); });
}

function experimentPage(section) {
  const id = section.dataset.id, poll = Number(section.dataset.poll) || 3000;
  let version = null;
  let chart = null;
  const reopenGroups = groupRows(document.getElementById("units-table"), id);
  const pcHolder = document.getElementById("parcoords");
  const pcColour = document.getElementById("pc-color");
  const parcoords = pcHolder && window.xcoreParcoords ? window.xcoreParcoords.parallelCoordinates(pcHolder,
    (unit) => { window.location.href = "/experiments/" + id + "/units/" + unit; }) : null;
  if (parcoords) pcColour.addEventListener("change", () => parcoords.colorBy(pcColour.value));
  document.getElementById("plot").onTrial = (unit) => { window.location.href = "/experiments/" + id + "/units/" + unit; };
  const redraw = () => {
    if (!chart || !window.xcoreCharts) return;
    drawPlot(chart);
    window.xcoreCharts.drawTimeline(document.getElementById("timeline"), chart.timeline);
    if (parcoords && chart.args.length + chart.results.length > 1) {
      document.getElementById("parcoords-box").hidden = false;
      const names = [...chart.results, ...chart.args];
      fillSelect(pcColour, names);
      parcoords.colorBy(pcColour.value);
      parcoords.update(chart);
    }
  };
  document.getElementById("plot-y").addEventListener("change", redraw);
  document.getElementById("plot-x").addEventListener("change", redraw);
  let curves = [], groups = {};
  const box = document.getElementById("curves-box");
  const redrawCurves = () => { if (drawCurves(curves, groups)) box.hidden = false; };
  const loadCurves = async () => {
    const query = new URLSearchParams(window.location.search);
    for (const unit of ticked()) query.append("unit", unit);
    const answer = await getJSON("/api/experiments/" + id + "/curves?" + query);
    curves = answer.units;
    groups = answer.groups || {};
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
  section.reloadCharts = loadChart;
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
          reopenGroups();
        }
        await loadChart();
        section.dataset.updates = String(Number(section.dataset.updates || 0) + 1);
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
