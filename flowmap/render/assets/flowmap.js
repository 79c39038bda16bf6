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
  var D = JSON.parse(document.getElementById("flowmap-data").textContent);
  var seamById = {};
  var ownerById = {};
  var state = { sel: null, from: 0, to: Math.max(0, D.bins.length - 1), query: "" };
  var view = { k: 1, x: 0, y: 0 };
  // Labels are never drawn below this many CSS px: the graph opens at no less than 1:1
  // (the layout's label fonts are >= 11 px) and is panned, not shrunk to fit; zoomed out
  // past it, edge labels hide and owner names keep their size.
  var LEGIBLE_PX = 11, EDGE_FONT = 11, NODE_FONT = 12, MAX_OPEN_K = 1.5;
  var ui = {};

  D.seams.forEach(function (s) { seamById[s.id] = s; });
  D.owners.forEach(function (o) { ownerById[o.id] = o; o.ins = []; o.outs = []; });
  D.seams.forEach(function (s) { ownerById[s.src].outs.push(s); ownerById[s.dst].ins.push(s); });

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
      r.steps + " steps",
      D.seams.length + " seams",
      D.owners.length + " owners",
      fmtBytes(r.total_bytes) + " payload",
      "layout: " + r.layout.engine
    ];
    if (r.items.total) stats.push(r.items.total + " items, " + r.items.dropped + " dropped");
    var warn = null;
    if (r.truncated || r.health.tracer_errors || r.projection) {
      warn = el("span", { "class": "warn", id: "run-warning" },
        (r.projection ? "PROJECTION — " + r.projection + " " : "") +
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

  // --- the graph --------------------------------------------------------------------

  function graphPanel() {
    var L = D.run.layout;
    var svg = sv("svg", { id: "graph", role: "img", "aria-label": "dataflow graph" });
    ui.graph = svg;
    var defs = sv("defs");
    RAMP.concat(["#bbbbbb", "#111111"]).forEach(function (c, i) {
      defs.appendChild(sv("marker", {
        id: "arrow-" + i, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 3.6, markerHeight: 3.6,
        orient: "auto-start-reverse", markerUnits: "strokeWidth"
      }, sv("path", { d: "M0,1 L10,5 L0,9 z", fill: c })));
    });
    svg.appendChild(defs);
    ui.viewport = sv("g", { id: "viewport" });
    svg.appendChild(ui.viewport);
    var edges = sv("g", { "class": "edges" });
    var nodes = sv("g", { "class": "nodes" });
    ui.viewport.appendChild(edges);
    ui.viewport.appendChild(nodes);
    ui.edges = {};
    ui.nodes = {};
    D.seams.forEach(function (s) { edges.appendChild(seamShape(s)); });
    D.owners.forEach(function (o) { nodes.appendChild(ownerShape(o)); });
    panZoom(svg);
    ui.legend = el("div", { "class": "legend" });
    var empty = D.seams.length ? null : el("p", { "class": "empty" }, "This run recorded no hops.");
    return el("section", { id: "graph-panel" }, [svg, empty, zoomButtons(), ui.legend]);
  }

  function seamShape(s) {
    var p = s.path, d = "M" + p[0] + "," + p[1];
    for (var i = 2; i + 5 < p.length; i += 6) {
      d += " C" + p[i] + "," + p[i + 1] + " " + p[i + 2] + "," + p[i + 3] + " " + p[i + 4] + "," + p[i + 5];
    }
    var g = sv("g", { "class": "seam" + (s.back ? " back" : ""), "data-seam": s.id, tabindex: 0 });
    var line = sv("path", { d: d, "class": "line" });
    var hit = sv("path", { d: d, "class": "hit" });
    var text = sv("text", { x: s.label_at[0], y: s.label_at[1], "class": "elabel", "text-anchor": "middle" }, [
      sv("tspan", { x: s.label_at[0], dy: "-0.3em" }, s.short),
      sv("tspan", { x: s.label_at[0], dy: "1.25em", "class": "bps" })
    ]);
    g.appendChild(hit);
    g.appendChild(line);
    g.appendChild(text);
    tip(g, s.label);
    g.addEventListener("click", function (ev) { if (!ui.dragged) select("seam", s.id); ev.stopPropagation(); });
    g.addEventListener("keydown", function (ev) { if (ev.key === "Enter") select("seam", s.id); });
    g.addEventListener("focus", function () { if (g.matches(":focus-visible")) reveal(s.label_at[0], s.label_at[1]); });
    ui.edges[s.id] = { g: g, line: line, text: text, title: g.lastChild };
    return g;
  }

  function ownerShape(o) {
    var hue = roleHue(o.role);
    var g = sv("g", { "class": "owner", "data-owner": o.id, tabindex: 0, transform: "translate(" + o.x + "," + o.y + ")" });
    g.appendChild(sv("rect", {
      x: -o.w / 2, y: -o.h / 2, width: o.w, height: o.h, rx: 6,
      fill: "hsl(" + hue + ",60%,93%)", stroke: "hsl(" + hue + ",45%,42%)"
    }));
    g.appendChild(sv("text", { "text-anchor": "middle", dy: "0.35em" }, o.short));
    tip(g, o.name + "\nin " + fmtBytes(o.bytes_in) + " · out " + fmtBytes(o.bytes_out));
    g.addEventListener("click", function (ev) { if (!ui.dragged) select("owner", o.id); ev.stopPropagation(); });
    g.addEventListener("keydown", function (ev) { if (ev.key === "Enter") select("owner", o.id); });
    g.addEventListener("focus", function () { if (g.matches(":focus-visible")) reveal(o.x, o.y); });
    ui.nodes[o.id] = g;
    return g;
  }

  function roleHue(role) {
    var h = 2166136261;
    for (var i = 0; i < role.length; i++) { h ^= role.charCodeAt(i); h = Math.imul(h, 16777619) >>> 0; }
    return h % 360;
  }

  function panZoom(svg) {
    var start = null;
    function toUser(ev) {
      var r = svg.getBoundingClientRect();
      return { x: ev.clientX - r.left, y: ev.clientY - r.top };
    }
    svg.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      zoomAt(toUser(ev), Math.exp(-ev.deltaY * 0.0015));
    }, { passive: false });
    svg.addEventListener("mousedown", function (ev) { start = { p: toUser(ev), x: view.x, y: view.y }; ui.dragged = false; });
    window.addEventListener("mousemove", function (ev) {
      if (!start) return;
      var p = toUser(ev);
      var dx = p.x - start.p.x, dy = p.y - start.p.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) ui.dragged = true;
      if (ui.dragged) { view.x = start.x + dx; view.y = start.y + dy; ui.moved = true; applyView(); }
    });
    window.addEventListener("mouseup", function () { start = null; setTimeout(function () { ui.dragged = false; }, 0); });
    svg.addEventListener("dblclick", function () { openView(); });
    svg.addEventListener("click", function () { if (!ui.dragged) select(null, null); });
    window.addEventListener("resize", function () { if (!ui.moved) openView(); });
  }

  function zoomButtons() {
    function button(text, title, action) {
      var b = el("button", { type: "button", title: title, "data-zoom": text }, text);
      b.addEventListener("click", function (ev) { action(); ev.stopPropagation(); });
      return b;
    }
    return el("div", { "class": "zoom" }, [
      button("+", "zoom in", function () { zoomAt(centre(), 1.25); }),
      button("−", "zoom out", function () { zoomAt(centre(), 0.8); }),
      button("fit", "the whole graph (edge labels hide when too small to read)", function () { fitView(); }),
      button("1:1", "readable size (double-click the graph does the same)", function () { openView(); }),
      el("span", { "class": "muted" }, "drag: pan · wheel: zoom · double-click: readable size")
    ]);
    function centre() { var box = graphBox(); return { x: box.width / 2, y: box.height / 2 }; }
  }

  function graphBox() {
    var r = ui.graph.getBoundingClientRect();
    return { width: Math.max(1, r.width), height: Math.max(1, r.height) };
  }

  function zoomAt(p, f) {
    var k = Math.min(8, Math.max(0.1, view.k * f));
    f = k / view.k;
    view.x = p.x - (p.x - view.x) * f;
    view.y = p.y - (p.y - view.y) * f;
    view.k = k;
    ui.moved = true;
    applyView();
  }

  function applyView() {
    ui.viewport.setAttribute("transform", "translate(" + view.x + "," + view.y + ") scale(" + view.k + ")");
    // below 1:1 edge labels would be unreadable: hide them; owner names keep >= LEGIBLE_PX
    ui.graph.classList.toggle("overview", view.k * EDGE_FONT < LEGIBLE_PX);
    var font = Math.max(NODE_FONT, Math.ceil(LEGIBLE_PX / view.k * 100) / 100);
    ui.graph.style.setProperty("--node-font", font + "px");
  }

  // The opening view: as large as fits, never below 1:1, centred; a graph wider or
  // taller than the panel opens at its top and is panned (drag, or the zoom buttons).
  function openView() {
    var L = D.run.layout, box = graphBox();
    var k = Math.min(MAX_OPEN_K, Math.max(1, Math.min(box.width / L.width, box.height / L.height)));
    view = { k: k, x: (box.width - L.width * k) / 2, y: Math.max(0, (box.height - L.height * k) / 2) };
    ui.moved = false;
    applyView();
  }

  function fitView() {
    var L = D.run.layout, box = graphBox();
    var k = Math.min(MAX_OPEN_K, box.width / L.width, box.height / L.height);
    view = { k: k, x: (box.width - L.width * k) / 2, y: (box.height - L.height * k) / 2 };
    ui.moved = true;
    applyView();
  }

  // Bring a selected owner or seam into the panel when it is outside (selected from a list).
  function reveal(x, y) {
    var box = graphBox(), sx = view.x + x * view.k, sy = view.y + y * view.k, m = 40;
    if (sx >= m && sx <= box.width - m && sy >= m && sy <= box.height - m) return;
    view.x = box.width / 2 - x * view.k;
    view.y = box.height / 2 - y * view.k;
    applyView();
  }

  function styleGraph() {
    var bps = {};
    D.seams.forEach(function (s) { bps[s.id] = seamBps(s); });
    var scale = scaleOf(D.seams.map(function (s) { return bps[s.id]; }));
    D.seams.forEach(function (s) {
      var t = scale(bps[s.id]), e = ui.edges[s.id];
      var ci = t < 0 ? RAMP.length : Math.min(RAMP.length - 1, Math.floor(t * RAMP.length));
      var color = t < 0 ? "#bbbbbb" : RAMP[ci];
      e.line.setAttribute("stroke", color);
      e.line.setAttribute("stroke-width", t < 0 ? 1.2 : (1.6 + 5.4 * t).toFixed(2));
      e.line.setAttribute("marker-end", "url(#arrow-" + ci + ")");
      e.text.lastChild.textContent = fmtBytes(bps[s.id]) + "/step";
      // the hover readout: bytes per step and per hop, as Perfetto's and TensorBoard's edges give
      var n = seamHops(s);
      e.title.textContent = s.label + "\n" + fmtBytes(bps[s.id]) + "/step · " +
        (n ? fmtBytes(seamBytes(s) / n) : "0 B") + "/hop (mean) · p50 " + fmtBytes(s.p50_bytes) +
        "/hop · " + hopsText(n) + (fullRange() ? "" : " in " + stepLabel().split(" of ")[0]);
      e.g.classList.toggle("idle", t < 0);
    });
    legend(D.seams.map(function (s) { return bps[s.id]; }));
  }

  function legend(values) {
    clear(ui.legend);
    var pos = values.filter(function (v) { return v > 0; });
    if (!pos.length) return;
    var bar = el("span", { "class": "ramp" });
    RAMP.forEach(function (c) { var sw = el("i"); sw.style.background = c; bar.appendChild(sw); });
    append(ui.legend, [
      el("span", {}, "bytes/step (log) " + fmtBytes(Math.min.apply(null, pos)) + " "), bar,
      el("span", {}, " " + fmtBytes(Math.max.apply(null, pos))),
      el("span", { "class": "muted" }, "  ·  dashed: back edge closing the loop")
    ]);
    var roles = [];
    D.owners.forEach(function (o) { if (roles.indexOf(o.role) < 0) roles.push(o.role); });
    var key = el("div", { "class": "roles" }, [el("span", { "class": "muted" }, "boxes, by role: ")]);
    roles.forEach(function (r) {
      var sw = el("i", { "class": "swatch" }), hue = roleHue(r);
      sw.style.background = "hsl(" + hue + ",60%,93%)";
      sw.style.borderColor = "hsl(" + hue + ",45%,42%)";
      append(key, [el("span", { "class": "role", "data-role": r }, [sw, r])]);
    });
    ui.legend.appendChild(key);
  }

  // --- selection and details --------------------------------------------------------

  function select(kind, id, fromHistory) {
    state.sel = kind ? { kind: kind, id: id } : null;
    Object.keys(ui.edges).forEach(function (k) {
      var s = seamById[k];
      var on = kind === "seam" ? k === id : kind === "owner" && (s.src === id || s.dst === id);
      ui.edges[k].g.classList.toggle("sel", on);
      ui.rows[k].classList.toggle("sel", kind === "seam" && k === id);
    });
    Object.keys(ui.nodes).forEach(function (k) {
      var on = kind === "owner" ? k === id : kind === "seam" && (seamById[id].src === k || seamById[id].dst === k);
      ui.nodes[k].classList.toggle("sel", on);
    });
    if (kind === "seam") reveal(seamById[id].label_at[0], seamById[id].label_at[1]);
    else if (kind === "owner") reveal(ownerById[id].x, ownerById[id].y);
    var hash = kind ? "#" + kind + "=" + id : "";
    if (!fromHistory && hash !== location.hash) {  // a selection is a step Back can undo
      try { history.pushState(null, "", hash || location.pathname + location.search); } catch (e) { /* file:// in some browsers */ }
    }
    details();
  }

  function details() {
    clear(ui.details);
    var sel = state.sel;
    if (!sel) {
      append(ui.details, [el("h2", {}, "Details"), el("p", { "class": "muted" }, "Click a seam (an edge) or an owner (a box).")]);
    } else if (sel.kind === "seam") {
      seamDetails(seamById[sel.id]);
    } else {
      ownerDetails(ownerById[sel.id]);
    }
  }

  function kv(rows) {
    return el("table", { "class": "kv" }, rows.filter(Boolean).map(function (r) {
      return el("tr", {}, [el("th", {}, r[0]), el("td", {}, r[1])]);
    }));
  }

  function ownerLink(id) {
    var o = ownerById[id];
    var b = el("button", { type: "button", "class": "link" }, o.name);
    b.addEventListener("click", function () { select("owner", id); });
    return b;
  }

  function seamLink(s, text) {
    var b = el("button", { type: "button", "class": "link" }, text || s.label);
    b.addEventListener("click", function () { select("seam", s.id); });
    return b;
  }

  function seamDetails(s) {
    var ranged = fullRange() ? "" : " (" + stepLabel().split(" of ")[0] + ")";
    append(ui.details, [
      el("h2", { "class": "seam-title" }, [el("span", { "class": "kind" }, "seam"), s.label]),
      kv([
        ["from → to", el("span", {}, [ownerLink(s.src), " → ", ownerLink(s.dst)])],
        ["payload", s.name],
        ["bytes/step" + ranged, fmtBytes(seamBps(s)) + (fullRange() ? "  (max " + fmtBytes(s.bytes_per_step_max) + ")" : "")],
        ["hops" + ranged, String(seamHops(s)) + (fullRange() ? "" : " of " + s.hops)],
        ["total", fmtBytes(s.total_bytes)],
        ["hop size", "p50 " + fmtBytes(s.p50_bytes) + " · p90 " + fmtBytes(s.p90_bytes) + " · max " + fmtBytes(s.max_bytes)],
        s.items ? ["items carried", String(s.items)] : null,
        ["residency at " + ownerById[s.dst].name, s.residency_mean_s === null ? "no items tracked" :
          "mean " + fmtSeconds(s.residency_mean_s) + " · max " + fmtSeconds(s.residency_max_s)]
      ]),
      el("h3", {}, "Transports"), transports(s),
      el("h3", {}, "Leaf schema"), leaves(s),
      el("h3", {}, "Hop sizes"), histogram(s),
      D.bins.length > 1 ? el("h3", {}, "Bytes per step over the run") : null,
      D.bins.length > 1 ? perStep(s) : null
    ]);
  }

  function transports(s) {
    var total = Object.keys(s.transports).reduce(function (a, k) { return a + s.transports[k]; }, 0) || 1;
    return el("table", { "class": "bars" }, Object.keys(s.transports).map(function (k) {
      var n = s.transports[k], bar = el("i");
      bar.style.width = (100 * n / total).toFixed(1) + "%";
      return el("tr", {}, [el("th", {}, k), el("td", { "class": "barcell" }, bar), el("td", {}, hopsText(n))]);
    }));
  }

  function leaves(s) {
    if (!s.leaves.length) return el("p", { "class": "muted" }, "no leaves recorded");
    var head = el("tr", {}, ["path", "dtype", "shape", "bytes", "max"].map(function (h) { return el("th", {}, h); }));
    var rows = s.leaves.map(function (l) {
      return el("tr", {}, [
        el("td", { "class": "mono" }, l.path || "(payload)"),
        el("td", {}, l.dtype || l.kind),
        el("td", { "class": "mono" }, fmtShape(l.shape, l.dims)),
        el("td", { "class": "num" }, fmtBytes(l.bytes)),
        el("td", { "class": "num" }, fmtBytes(l.max_bytes))
      ]);
    });
    var csv = [["path", "kind", "dtype", "shape", "bytes", "max_bytes", "hops"]].concat(s.leaves.map(function (l) {
      return [l.path, l.kind, l.dtype, fmtShape(l.shape, l.dims), l.bytes, l.max_bytes, l.hops];
    })).map(function (r) { return r.map(csvCell).join(","); }).join("\r\n") + "\r\n";
    var link = el("a", { "class": "csv", download: "flowmap-" + s.name.replace(/[^\w.-]+/g, "_") + "-leaves.csv",
      href: "data:text/csv;charset=utf-8," + encodeURIComponent(csv) }, "export CSV");
    var more = s.leaves_total > s.leaves.length ?
      el("p", { "class": "muted" }, (s.leaves_total - s.leaves.length) + " lighter leaves not shown") : null;
    return el("div", { "class": "scroll" }, [el("table", { "class": "grid leaves" }, [head].concat(rows)), more, link]);
  }

  function csvCell(v) {
    var t = v === null || v === undefined ? "" : String(v);
    if (/^[=+\-@]/.test(t)) t = "'" + t;  // a spreadsheet must not read a leaf path as a formula
    return /[",\r\n]/.test(t) ? '"' + t.replace(/"/g, '""') + '"' : t;
  }

  function histogram(s) {
    var h = s.hist, W = 420, H = 96;
    var bars = (h.zero ? [{ n: h.zero, a: 0, b: 0 }] : []).concat(h.counts.map(function (n, i) {
      return { n: n, a: Math.pow(2, h.lo + i), b: Math.pow(2, h.lo + i + 1) };
    }));
    if (!bars.length) return el("p", { "class": "muted" }, "no hops");
    var max = Math.max.apply(null, bars.map(function (x) { return x.n; }));
    var bw = W / bars.length;
    var svg = sv("svg", { "class": "hist", viewBox: "0 0 " + W + " " + (H + 16) });
    bars.forEach(function (x, i) {
      var bh = x.n ? Math.max(1, (H - 4) * x.n / max) : 0;
      var r = sv("rect", { x: (i * bw + 1).toFixed(1), y: (H - bh).toFixed(1), width: Math.max(1, bw - 2).toFixed(1), height: bh.toFixed(1) });
      tip(r, (x.b ? fmtBytes(x.a) + " – " + fmtBytes(x.b) : "0 B") + ": " + hopsText(x.n));
      svg.appendChild(r);
    });
    svg.appendChild(sv("text", { x: 0, y: H + 13, "class": "axis" }, bars[0].b ? fmtBytes(bars[0].a) : "0 B"));
    svg.appendChild(sv("text", { x: W, y: H + 13, "class": "axis", "text-anchor": "end" }, fmtBytes(bars[bars.length - 1].b || 0)));
    return svg;
  }

  function perStep(s) {
    var W = 420, H = 60, n = D.bins.length;
    var vals = D.bins.map(function (b, i) { return s.bin_bytes[i] / b[2]; });
    var max = Math.max.apply(null, vals) || 1;
    var svg = sv("svg", { "class": "hist perstep", viewBox: "0 0 " + W + " " + (H + 16) });
    vals.forEach(function (v, i) {
      var bh = v ? Math.max(1, (H - 2) * v / max) : 0;
      var r = sv("rect", {
        x: (i * W / n).toFixed(2), y: (H - bh).toFixed(1), width: Math.max(0.5, W / n - 0.5).toFixed(2), height: bh.toFixed(1),
        "class": i >= state.from && i <= state.to ? "in" : "out"
      });
      tip(r, "steps " + D.bins[i][0] + "–" + D.bins[i][1] + ": " + fmtBytes(v) + "/step");
      svg.appendChild(r);
    });
    svg.appendChild(sv("text", { x: 0, y: H + 13, "class": "axis" }, "step " + D.bins[0][0]));
    svg.appendChild(sv("text", { x: W, y: H + 13, "class": "axis", "text-anchor": "end" }, "step " + D.bins[n - 1][1] + " · max " + fmtBytes(max) + "/step"));
    return svg;
  }

  function ownerDetails(o) {
    var sum = function (list, f) { return list.reduce(function (a, s) { return a + f(s); }, 0); };
    var ranged = !fullRange();
    var bin = function (s) { return inRange(s.bin_bytes); };
    append(ui.details, [
      el("h2", {}, [el("span", { "class": "kind" }, "owner"), o.name]),
      kv([
        ["role", o.role],
        [o.pids.length === 1 ? "pid" : "pids", o.pids.length ? o.pids.join(", ") : "–"],
        ["bytes in", fmtBytes(ranged ? sum(o.ins, bin) : o.bytes_in) + " · " + hopsText(ranged ? sum(o.ins, seamHops) : o.hops_in)],
        ["bytes out", fmtBytes(ranged ? sum(o.outs, bin) : o.bytes_out) + " · " + hopsText(ranged ? sum(o.outs, seamHops) : o.hops_out)],
        ranged ? ["range", stepLabel()] : null
      ]),
      el("h3", {}, "Seams in"), seamTable(o.ins, "src"),
      el("h3", {}, "Seams out"), seamTable(o.outs, "dst"),
      o.resident.length ? el("h3", {}, "Items held over time") : null,
      o.resident.length ? chart([{
        name: "items at " + o.name, t: o.resident.map(function (p) { return p[0]; }),
        v: o.resident.map(function (p) { return p[1]; }),
        last: o.resident[o.resident.length - 1][1], max: o.resident_max
      }], true) : null
    ]);
  }

  function seamTable(list, other) {
    if (!list.length) return el("p", { "class": "muted" }, "none");
    var sorted = list.slice().sort(function (a, b) { return seamBps(b) - seamBps(a); });
    return el("table", { "class": "grid" }, sorted.map(function (s) {
      return el("tr", {}, [
        el("td", {}, seamLink(s, (other === "src" ? "from " : "to ") + ownerById[s[other]].name + " : " + s.name)),
        el("td", { "class": "num" }, fmtBytes(seamBps(s)) + "/step")
      ]);
    }));
  }

  // --- findings and the seam list ---------------------------------------------------

  function findingsPanel() {
    var sec = el("section", { id: "findings" }, el("h2", {}, "Findings"));
    if (!D.findings.length) {
      sec.appendChild(el("p", { "class": "muted" }, "No findings."));
      return sec;
    }
    ui.findings = [];
    sec.appendChild(el("ol", {}, D.findings.map(function (f) {
      var links = f.seams.map(function (id) { return seamLink(seamById[id]); });
      var li = el("li", { "class": "finding", "data-kind": f.kind }, [
        el("div", {}, [el("span", { "class": "badge" }, f.kind), " ", el("b", {}, f.bytes_per_step_text)]),
        el("div", { "class": "msg" }, f.message),
        links.length ? el("div", { "class": "links" }, links) : null
      ]);
      ui.findings.push({ li: li, seams: f.seams.map(function (id) { return seamById[id]; }).filter(Boolean) });
      return li;
    })));
    return sec;
  }

  function seamList() {
    ui.rows = {};
    ui.tbody = el("tbody");
    D.seams.forEach(function (s) {
      var row = el("tr", { "data-seam": s.id, tabindex: 0 }, [
        el("td", { "class": "label" }, s.label), el("td", { "class": "num" }), el("td", { "class": "num" }),
        el("td", {}, Object.keys(s.transports).join(", "))
      ]);
      row.addEventListener("click", function () { select("seam", s.id); });
      row.addEventListener("keydown", function (ev) { if (ev.key === "Enter") select("seam", s.id); });
      ui.rows[s.id] = row;
      ui.tbody.appendChild(row);
    });
    var head = el("thead", {}, el("tr", {}, ["seam", "bytes/step", "hops", "transport"].map(function (h) { return el("th", {}, h); })));
    return el("section", { id: "seams" }, [el("h2", {}, "Seams"), el("table", { "class": "grid seams" }, [head, ui.tbody])]);
  }

  function updateSeamList() {
    var order = D.seams.slice().sort(function (a, b) { return seamBps(b) - seamBps(a) || (a.id < b.id ? -1 : 1); });
    order.forEach(function (s) {
      var row = ui.rows[s.id];
      row.children[1].textContent = fmtBytes(seamBps(s));
      row.children[2].textContent = String(seamHops(s));
      ui.tbody.appendChild(row);
    });
  }

  // --- counters ---------------------------------------------------------------------

  function chartsPanel() {
    ui.charts = [];
    var byName = {};
    D.counters.forEach(function (c) { byName[c.name] = c; });
    var grid = el("div", { "class": "chart-grid" });
    D.charts.forEach(function (names) {
      var cs = names.map(function (n) { return byName[n]; }).filter(Boolean);
      if (cs.length) grid.appendChild(chart(cs));
    });
    var empty = D.counters.length ? null : el("p", { "class": "muted" }, "No counters recorded.");
    return el("section", { id: "charts" }, [el("h2", {}, "Counters"), empty, grid]);
  }

  function chart(cs, detached) {
    var W = 360, H = 120, L = 44, B = 16;
    var span = detached ? spanOf(cs) : timeSpan(), t0 = span[0], t1 = span[1];
    var vals = [];
    cs.forEach(function (c) { c.v.forEach(function (v) { if (v !== null) vals.push(v); }); });
    var lo = Math.min.apply(null, vals.concat([Infinity])), hi = Math.max.apply(null, vals.concat([-Infinity]));
    if (!(hi > lo)) { hi = lo + 1; lo = lo - 1; }
    var x = function (t) { return L + (W - L - 4) * (t - t0) / (t1 - t0); };
    var y = function (v) { return 4 + (H - B - 8) * (1 - (v - lo) / (hi - lo)); };
    var svg = sv("svg", { viewBox: "0 0 " + W + " " + H, "class": "chart" });
    var band = sv("rect", { "class": "band", y: 2, height: H - B - 4 });
    svg.appendChild(band);
    svg.appendChild(sv("line", { x1: L, x2: L, y1: 2, y2: H - B, "class": "axisline" }));
    svg.appendChild(sv("line", { x1: L, x2: W - 4, y1: H - B, y2: H - B, "class": "axisline" }));
    svg.appendChild(sv("text", { x: L - 4, y: y(hi) + 4, "class": "axis", "text-anchor": "end" }, fmtNum(hi)));
    svg.appendChild(sv("text", { x: L - 4, y: y(lo), "class": "axis", "text-anchor": "end" }, fmtNum(lo)));
    svg.appendChild(sv("text", { x: L, y: H - 3, "class": "axis" }, fmtSeconds(t0)));
    svg.appendChild(sv("text", { x: W - 4, y: H - 3, "class": "axis", "text-anchor": "end" }, fmtSeconds(t1)));
    cs.forEach(function (c, i) {
      var d = "", pen = false;
      c.t.forEach(function (t, j) {
        var v = c.v[j];
        if (v === null) { pen = false; return; }
        d += (pen ? " L" : " M") + x(t).toFixed(1) + "," + y(v).toFixed(1);
        pen = true;
      });
      svg.appendChild(sv("path", { d: d.trim() || "M0,0", "class": "series" + (i ? " alt" : ""), stroke: SERIES[i % SERIES.length] }));
    });
    var key = el("div", { "class": "chart-key" }, cs.map(function (c, i) {
      var sw = el("i");
      sw.style.background = SERIES[i % SERIES.length];
      return el("span", { "data-counter": c.name }, [sw, c.name, el("span", { "class": "muted" }, " last " + fmtNum(c.last) + " · max " + fmtNum(c.max))]);
    }));
    var handle = { band: band, x: x, x0: L, x1: W - 4 };
    if (detached) bandAt(handle); else ui.charts.push(handle);
    // hover: each series' sample nearest the cursor, as "name value at time"
    var cursor = sv("line", { "class": "cursor hidden", y1: 2, y2: H - B });
    svg.appendChild(cursor);
    var readout = el("div", { "class": "readout muted" }, "\u00a0");
    svg.addEventListener("mousemove", function (ev) {
      var r = svg.getBoundingClientRect(), px = (ev.clientX - r.left) * W / r.width;
      var t = t0 + (t1 - t0) * (px - L) / (W - L - 4);
      readout.textContent = chartReadout(cs, t);
      cursor.setAttribute("x1", px); cursor.setAttribute("x2", px);
      cursor.classList.remove("hidden");
    });
    svg.addEventListener("mouseleave", function () { cursor.classList.add("hidden"); readout.textContent = "\u00a0"; });
    return el("figure", { "class": "chart-box" }, [key, svg, readout]);
  }

  function chartReadout(cs, t) {
    return cs.map(function (c) {
      var best = -1;
      c.t.forEach(function (ti, j) {
        if (c.v[j] !== null && (best < 0 || Math.abs(ti - t) < Math.abs(c.t[best] - t))) best = j;
      });
      return best < 0 ? c.name + " –" : c.name + " " + fmtNum(c.v[best]) + " at " + fmtSeconds(c.t[best]);
    }).join(" · ");
  }

  // One time axis for every chart: from the first counter sample to the last, in run seconds.
  function timeSpan() {
    if (!ui.span) ui.span = spanOf(D.counters);
    return ui.span;
  }

  function spanOf(series) {
    var lo = Infinity, hi = -Infinity;
    series.forEach(function (c) {
      if (c.t.length) { lo = Math.min(lo, c.t[0]); hi = Math.max(hi, c.t[c.t.length - 1]); }
    });
    if (!(hi > lo)) { lo = 0; hi = Math.max(D.run.duration_s || 0, hi > 0 ? hi : 0, 1e-9); }
    return [lo, hi];
  }

  function bandAt(c) {
    var a = D.bins[state.from], b = D.bins[state.to];
    var on = !fullRange() && a[3] !== null && b[4] !== null;
    c.band.setAttribute("visibility", on ? "visible" : "hidden");
    if (on) {
      var x0 = Math.max(c.x0, Math.min(c.x1, c.x(a[3]))), x1 = Math.max(c.x0, Math.min(c.x1, c.x(b[4])));
      c.band.setAttribute("x", x0.toFixed(1));
      c.band.setAttribute("width", Math.max(1, x1 - x0).toFixed(1));
    }
  }

  function updateCharts() {
    ui.charts.forEach(bandAt);
  }

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
    var side = el("aside", { id: "side" }, [ui.details, findingsPanel(), seamList()]);
    var body = el("main", { id: "app" }, [graphPanel(), side, chartsPanel()]);
    document.body.appendChild(header());
    document.body.appendChild(body);
    openView();
    update();
    applyFilter();
    fromHash();
    window.addEventListener("popstate", fromHash);
    window.addEventListener("hashchange", fromHash);
    document.body.setAttribute("data-ready", "1");
  }

  main();
})();
