/* flowmap HTML view. Reads the run from #flowmap-data and draws it.
 *
 * Every string in the data came from the traced program, so it is written
 * with textContent / setAttribute only, never parsed as markup. No network:
 * everything the page needs is in the file. */
(function () {
  "use strict";

  var SVG_NS = "http://www.w3.org/2000/svg";
  var RAMP = ["#a6bddb", "#74a9cf", "#3690c0", "#0570b0", "#8c6bb1", "#dd3497", "#f16913", "#d7301f"];
  var SERIES = ["#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363", "#d6616b"];
  var D, seamById, ownerById, state;
  // A run without steps: its "per step" figures are run totals, and the page says so.
  var PER = "/step", PER_WORD = "bytes/step";
  var view = { k: 1, x: 0, y: 0 };
  // Labels are never drawn below this many CSS px. The graph opens fitted to its panel, so
  // the first view shows the whole flow; below 1:1 every label is drawn larger in the layout
  // (edge labels that would then overlap hide). It never opens below the layout's `min_k`
  // (else MIN_OPEN_K), where an owner's box, laid out larger for this, still holds its 11 px
  // name: a graph too large for that opens there and pans.
  var LEGIBLE_PX = 11, EDGE_FONT = 11, NODE_FONT = 12, MAX_OPEN_K = 1.5, MIN_OPEN_K = 0.5;
  var ui = {};

  // The run's data; the live page (`flowmap serve`) loads newer data into the same page.
  function load(data) {
    D = data;
    PER = D.run.steps ? "/step" : " total";
    PER_WORD = D.run.steps ? "bytes/step" : "bytes in total";
    seamById = {};
    ownerById = {};
    state = { sel: null, from: 0, to: Math.max(0, D.bins.length - 1), query: state ? state.query : "" };
    D.seams.forEach(function (s) { seamById[s.id] = s; });
    D.owners.forEach(function (o) { ownerById[o.id] = o; o.ins = []; o.outs = []; });
    D.seams.forEach(function (s) { ownerById[s.src].outs.push(s); ownerById[s.dst].ins.push(s); });
  }
  load(JSON.parse(document.getElementById("flowmap-data").textContent));

  // --- small DOM helpers: text only, never markup ---------------------------------

  function el(tag, attrs, kids) {
    var n = document.createElement(tag);
    setAttrs(n, attrs);
    append(n, kids);
    return n;
  }

  function sv(tag, attrs, kids) {
    var n = document.createElementNS(SVG_NS, tag);
    setAttrs(n, attrs);
    append(n, kids);
    return n;
  }

  function setAttrs(n, attrs) {
    Object.keys(attrs || {}).forEach(function (k) {
      if (attrs[k] !== null && attrs[k] !== undefined) n.setAttribute(k, String(attrs[k]));
    });
  }

  function append(n, kids) {
    if (kids === null || kids === undefined) return;
    if (!Array.isArray(kids)) kids = [kids];
    kids.forEach(function (k) {
      if (k === null || k === undefined) return;
      n.appendChild(typeof k === "object" ? k : document.createTextNode(String(k)));
    });
  }

  function clear(n) {
    while (n.firstChild) n.removeChild(n.firstChild);
  }

  function tip(n, text) {
    n.appendChild(sv("title", {}, text));
    return n;
  }

  // --- formatting -------------------------------------------------------------------

  // The same rule as flowmap.units.fmt_bytes: two decimals under 100, none above, and a
  // figure that would round to 1024 moves to the next unit (never "1.02e+3 KiB").
  function fmtBytes(n) {
    if (n === null || n === undefined) return "–";
    if (!isFinite(n)) return "n/a";
    var units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    for (var i = 0; i < units.length; i++) {
      var last = i === units.length - 1;
      if (i === 0) {
        if (Math.abs(Math.round(n)) < 1024 || last) return Math.round(n) + " B";
      } else {
        var text = Math.abs(Math.round(n * 100) / 100) >= 100 ? n.toFixed(0) : n.toFixed(2);
        if (Math.abs(parseFloat(text)) < 1024 || last) return text + " " + units[i];
      }
      n /= 1024;
    }
  }

  function hopsText(n) { return n + (n === 1 ? " hop" : " hops"); }

  // The same rule as flowmap.units.fmt_count: never e-notation.
  function fmtNum(v) {
    if (v === null || v === undefined) return "–";
    if (!isFinite(v)) return "n/a";
    if (Number.isInteger(v)) return v.toLocaleString("en-US");
    var mag = Math.floor(Math.log10(Math.abs(v)));
    var d = Math.min(6, Math.max(1, 3 - mag));
    return v.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
  }

  function fmtSeconds(s) {
    if (s === null || s === undefined) return "–";
    if (s === 0) return "0 s";
    if (s < 1e-3) return (s * 1e6).toPrecision(3) + " µs";
    if (s < 1) return (s * 1e3).toPrecision(3) + " ms";
    return s.toPrecision(3) + " s";
  }

  function fmtShape(shape, dims) {
    if (!shape || !shape.length) return shape && shape.length === 0 ? "()" : "–";
    var parts = shape.map(function (d, i) {
      var v = Array.isArray(d) ? d[0] + "…" + d[1] : String(d);
      return dims && dims[i] ? dims[i] + "=" + v : v;
    });
    return "(" + parts.join(", ") + ")";
  }

  // --- the step range ---------------------------------------------------------------

  function rangeSteps() {
    var n = 0;
    for (var b = state.from; b <= state.to; b++) n += D.bins[b][2];
    return Math.max(1, n);
  }

  function inRange(row) {
    var t = 0;
    for (var b = state.from; b <= state.to; b++) t += row[b];
    return t;
  }

  function fullRange() {
    return state.from === 0 && state.to === D.bins.length - 1;
  }

  function seamBps(s) {
    return fullRange() ? s.bytes_per_step : inRange(s.bin_bytes) / rangeSteps();
  }

  function seamHops(s) {
    return fullRange() ? s.hops : inRange(s.bin_hops);
  }

  function seamBytes(s) {
    return fullRange() ? s.total_bytes : inRange(s.bin_bytes);
  }

  function scaleOf(values) {
    var logs = values.filter(function (v) { return v > 0; }).map(function (v) { return Math.log10(v); });
    var lo = Math.min.apply(null, logs.concat([Infinity]));
    var hi = Math.max.apply(null, logs.concat([-Infinity]));
    return function (v) {
      if (!(v > 0)) return -1;
      if (hi <= lo) return 1;
      return (Math.log10(v) - lo) / (hi - lo);
    };
  }

  // --- header and controls ----------------------------------------------------------

  function header() {
    var r = D.run;
    var stats = [
      hopsText(r.hops),
      r.steps ? r.steps + " steps" : "no steps (figures are run totals)",
      D.seams.length + " seams",
      D.owners.length + " owners",
      fmtBytes(r.total_bytes) + " payload",
      "layout: " + r.layout.engine
    ];
    if (r.wall_s !== null && r.wall_s !== undefined) stats.push(r.wall_s.toFixed(1) + " s");
    if (r.exit_code !== null && r.exit_code !== undefined && !r.failed) stats.push("exit " + r.exit_code);
    if (r.items.total) stats.push(r.items.total + " items, " + r.items.dropped + " dropped");
    if (r.health.hosts && r.health.hosts.length > 1) stats.push(r.health.hosts.length + " hosts: " + r.health.hosts.join(", "));
    var warn = null;
    if (r.failed || r.truncated || r.health.tracer_errors || r.projection || r.detail) {
      warn = el("span", { "class": "warn", id: "run-warning" },
        (r.failed ? r.ended + " — showing what it recorded until then. " : "") +
        (r.projection ? "PROJECTION — " + r.projection + " " : "") +
        (r.detail ? r.detail + " " : "") +
        (r.truncated ? "trace cut short " : "") + (r.health.tracer_errors ? r.health.tracer_errors + " tracer errors" : ""));
    }
    ui.from = el("input", { type: "range", id: "step-from", min: 0, max: D.bins.length - 1, value: 0, "aria-label": "first step" });
    ui.to = el("input", { type: "range", id: "step-to", min: 0, max: D.bins.length - 1, value: D.bins.length - 1, "aria-label": "last step" });
    ui.stepLabel = el("span", { id: "step-label" });
    ui.search = el("input", { type: "search", id: "search", placeholder: "search seams and owners", "aria-label": "search" });
    ui.count = el("span", { id: "match-count" });
    var steps = el("div", { "class": "steps" + (D.bins.length > 1 ? "" : " hidden") },
      [el("span", { "class": "muted" }, "steps"), ui.from, ui.to, ui.stepLabel,
       el("button", { type: "button", id: "step-reset" }, "all")]);
    var top = el("header", { id: "top" }, [
      el("div", { "class": "brand" }, "flowmap"),
      el("div", { "class": "run", title: r.path }, r.path),
      el("div", { "class": "stats", title: stats.join(" · ") }, stats.join(" · ")),
      D.flow ? el("div", { "class": "flow", id: "flow-order", title: "stages in the order data moved through them (storage identity):\n" + D.flow.order }, "flow: " + D.flow.order)
        : r.watched ? el("div", { "class": "flow", id: "flow-order", title: "the functions that handed tensors over in the first step, watched but not recorded (the program stopped first)" }, "seen in the first step (watched, not recorded): " + r.watched) : null,
      warn,
      el("div", { "class": "controls" }, [steps, ui.search, ui.count])
    ]);
    ui.from.addEventListener("input", onRange);
    ui.to.addEventListener("input", onRange);
    steps.querySelector("button").addEventListener("click", function () {
      ui.from.value = 0; ui.to.value = D.bins.length - 1; onRange();
    });
    ui.search.addEventListener("input", function () { state.query = ui.search.value.trim().toLowerCase(); applyFilter(); });
    return top;
  }

  function onRange() {
    var a = Number(ui.from.value), b = Number(ui.to.value);
    state.from = Math.min(a, b);
    state.to = Math.max(a, b);
    update();
  }

  function stepLabel() {
    if (D.run.first_step === null || D.bins[state.from][0] === null) return "";
    var a = D.bins[state.from][0], b = D.bins[state.to][1];
    return (a === b ? "step " + a : "steps " + a + "–" + b) + " of " + D.run.first_step + "–" + D.run.last_step;
  }

  /* @include graph.js */

  /* @include labels.js */

  /* @include details.js */

  /* @include charts.js */

  // --- filtering --------------------------------------------------------------------

  function matches(text) {
    return !state.query || text.toLowerCase().indexOf(state.query) >= 0;
  }

  function applyFilter() {
    var shown = 0;
    D.seams.forEach(function (s) {
      var on = matches(s.label);
      if (on) shown++;
      ui.edges[s.id].g.classList.toggle("dim", !on);
      ui.rows[s.id].classList.toggle("hidden", !on);
    });
    D.owners.forEach(function (o) { ui.nodes[o.id].classList.toggle("dim", !matches(o.name)); });
    ui.count.textContent = state.query ? shown + " of " + D.seams.length + " seams" : "";
    updateFindings();
  }

  // A finding shows while one of its seams matches the search and has hops in the step range.
  function updateFindings() {
    (ui.findings || []).forEach(function (x) {
      var on = !x.seams.length || x.seams.some(function (s) { return matches(s.label) && seamHops(s) > 0; });
      x.li.classList.toggle("hidden", !on);
    });
  }

  function update() {
    ui.stepLabel.textContent = stepLabel();
    styleGraph();
    updateSeamList();
    updateCharts();
    updateFindings();
    details();
  }

  function fromHash() {
    var m = /^#(seam|owner)=(\w+)$/.exec(location.hash);
    if (m && (m[1] === "seam" ? seamById : ownerById)[m[2]]) select(m[1], m[2], true);
    else select(null, null, true);
  }

  function main() {
    ui.details = el("section", { id: "details" });
    // the findings lead: where bytes could be saved, most at stake first, each linking its seams
    var side = el("aside", { id: "side" }, [findingsPanel(), ui.details, seamList()]);
    var body = el("main", { id: "app" }, [graphPanel(), side, chartsPanel()]);
    var top = header();
    document.body.appendChild(top);
    document.body.appendChild(body);
    // the header wraps to a second line where its facts need one: the graph gets the rest
    document.documentElement.style.setProperty("--top-h", top.offsetHeight + "px");
    update();  // the legend first: the graph's panel is what it leaves
    openView();
    applyFilter();
    fromHash();
    document.body.setAttribute("data-ready", "1");
  }

  main();
  window.addEventListener("popstate", fromHash);
  window.addEventListener("hashchange", fromHash);
  /* @include live.js */
})();
