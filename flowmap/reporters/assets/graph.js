/* flowmap HTML view: the graph, its pan and zoom, its colours. Included into flowmap.js's closure by
 * flowmap.reporters.html (at its `@include graph.js` line): it shares that closure's
 * state (D, state, view, ui) and helpers. */
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
    ui.labels = [];  // every edge label, to show at a legible size where it overlaps nothing
    D.seams.forEach(function (s) { edges.appendChild(seamShape(s)); });
    // the flow, when the seams are a star around a driver: producer -> consumer edges drawn
    // over the seams, which stay as faint hand-offs
    if (D.flow) D.flow.edges.forEach(function (f) { edges.appendChild(flowShape(f)); });
    if (D.flow) svg.classList.add("flow-drawn");
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
    // a driver's seams (its calls and their returns) are a star, and a seam a black arrow already
    // draws would be drawn twice: listed in the table, not drawn
    var g = sv("g", { "class": "seam" + (s.back ? " back" : "") + (s.driver || s.undrawn ? " undrawn" : ""),
      "data-seam": s.id, tabindex: 0 });
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
    // the flow view draws seams faint, unlabelled
    if (!D.flow) ui.labels.push({ text: text, line: line, home: s.label_at, rank: 0, seam: s });
    g.addEventListener("click", function (ev) { if (!ui.dragged) select("seam", s.id); ev.stopPropagation(); });
    g.addEventListener("keydown", function (ev) { if (ev.key === "Enter") select("seam", s.id); });
    g.addEventListener("focus", function () { if (g.matches(":focus-visible")) reveal(s.label_at[0], s.label_at[1]); });
    ui.edges[s.id] = { g: g, line: line, text: text, title: g.lastChild };
    return g;
  }

  function flowShape(f) {
    var p = f.path, d = "M" + p[0] + "," + p[1];
    for (var i = 2; i + 5 < p.length; i += 6) {
      d += " C" + p[i] + "," + p[i + 1] + " " + p[i + 2] + "," + p[i + 3] + " " + p[i + 4] + "," + p[i + 5];
    }
    var g = sv("g", { "class": "flow-edge" + (f.back ? " back" : ""), "data-flow": f.id });
    var line = sv("path", { d: d, "class": "line", "marker-end": "url(#arrow-" + (RAMP.length + 1) + ")" });
    g.appendChild(line);
    // the figure as the flow table writes it (fmtBytes of the same number): the two never differ
    var text = sv("text", { x: f.label_at[0], y: f.label_at[1], "class": "elabel", "text-anchor": "middle" }, [
      sv("tspan", { x: f.label_at[0], dy: "-0.3em" }, f.short),
      sv("tspan", { x: f.label_at[0], dy: "1.25em", "class": "bps" }, flowFigure(f))
    ]);
    g.appendChild(text);
    tip(g, f.label + "\n" + flowFigure(f) + (f.via || []).map(function (id) {
      var s = seamById[id];  // the seam rows these bytes are part of
      return "\npart of " + s.label + " (" + fmtBytes(s.bytes_per_step) + PER + " in all)";
    }).join(""));
    ui.labels.push({ text: text, line: line, home: f.label_at, rank: 0, bytes: f.bytes_per_step || 0 });
    return g;
  }

  function ownerShape(o) {
    var hue = roleHue(o.role);
    var g = sv("g", { "class": "owner" + (o.driver ? " driver" : ""), "data-owner": o.id, tabindex: 0,
      transform: "translate(" + o.x + "," + o.y + ")" });
    g.appendChild(sv("rect", {
      x: -o.w / 2, y: -o.h / 2, width: o.w, height: o.h, rx: 6,
      fill: o.driver ? "#ffffff" : "hsl(" + hue + ",60%,93%)", stroke: o.driver ? "#374151" : "hsl(" + hue + ",45%,42%)"
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
      if (ui.dragged) { view.x = start.x + dx; view.y = start.y + dy; ui.moved = true; applyView(true); }
    });
    window.addEventListener("mouseup", function () {
      if (start && ui.dragged) declutter();  // moved: labels past the panel's edge may show
      start = null; setTimeout(function () { ui.dragged = false; }, 0);
    });
    svg.addEventListener("dblclick", function () { readableView(); });
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
      button("1:1", "readable size: every label shown (double-click the graph does the same)",
        function () { readableView(); }),
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

  function applyView(panning) {
    ui.viewport.setAttribute("transform", "translate(" + view.x + "," + view.y + ") scale(" + view.k + ")");
    // below 1:1 every label is drawn larger in the layout, so on screen it stays >= LEGIBLE_PX
    var font = Math.max(NODE_FONT, Math.ceil(LEGIBLE_PX / view.k * 100) / 100);
    ui.graph.style.setProperty("--node-font", font + "px");
    ui.graph.style.setProperty("--edge-font", Math.max(EDGE_FONT, Math.ceil(LEGIBLE_PX / view.k * 100) / 100) + "px");
    if (!panning) declutter();  // a pan moves everything alike: nothing new overlaps
  }

  function flowFigure(f) { return fmtBytes(f.bytes_per_step) + PER; }

  // The opening view: the whole graph, fitted to the panel and centred, between MIN_OPEN_K
  // (owner names still fit their boxes) and MAX_OPEN_K; a graph too large even at MIN_OPEN_K
  // opens at its top and is panned (drag, or the zoom buttons).
  function openView() {
    var L = D.run.layout, box = graphBox();
    // never below the zoom at which the boxes (drawn larger for this) hold their 11-px names
    var k = Math.min(MAX_OPEN_K, Math.max(L.min_k || MIN_OPEN_K, Math.min(box.width / L.width, box.height / L.height)));
    view = { k: k, x: (box.width - L.width * k) / 2, y: Math.max(0, (box.height - L.height * k) / 2) };
    ui.moved = false;
    applyView();
  }

  // 1:1 (or larger where the graph is small): every edge label shown at its own size, centred.
  function readableView() {
    var L = D.run.layout, box = graphBox();
    var k = Math.min(MAX_OPEN_K, Math.max(1, Math.min(box.width / L.width, box.height / L.height)));
    view = { k: k, x: (box.width - L.width * k) / 2, y: Math.max(0, (box.height - L.height * k) / 2) };
    ui.moved = true;
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
    var scale = scaleOf(D.seams.filter(function (s) { return !s.driver && !s.undrawn; })
      .map(function (s) { return bps[s.id]; }));
    D.seams.forEach(function (s) {
      var t = scale(bps[s.id]), e = ui.edges[s.id];
      var ci = t < 0 ? RAMP.length : Math.min(RAMP.length - 1, Math.floor(t * RAMP.length));
      var color = t < 0 ? "#bbbbbb" : RAMP[ci];
      e.line.setAttribute("stroke", color);
      e.line.setAttribute("stroke-width", t < 0 ? 1.2 : (1.6 + 5.4 * t).toFixed(2));
      e.line.setAttribute("marker-end", "url(#arrow-" + ci + ")");
      e.text.lastChild.textContent = fmtBytes(bps[s.id]) + PER;
      // the hover readout: bytes per step and per hop, as Perfetto's and TensorBoard's edges give
      var n = seamHops(s);
      e.title.textContent = s.label + "\n" + fmtBytes(bps[s.id]) + PER + " · " +
        (n ? fmtBytes(seamBytes(s) / n) : "0 B") + "/hop (mean) · p50 " + fmtBytes(s.p50_bytes) +
        "/hop · " + hopsText(n) + (fullRange() ? "" : " in " + stepLabel().split(" of ")[0]);
      e.g.classList.toggle("idle", t < 0);
    });
    legend(D.seams.map(function (s) { return bps[s.id]; }));
    declutter();
  }

  function legend(values) {
    clear(ui.legend);
    // the colour ramp is the drawn seams' (none, where the flow's arrows stand for them all)
    var pos = values.filter(function (v, i) { return v > 0 && !D.seams[i].driver && !D.seams[i].undrawn; });
    if (!pos.length && !D.flow) return;
    var bar = el("span", { "class": "ramp" });
    RAMP.forEach(function (c) { var sw = el("i"); sw.style.background = c; bar.appendChild(sw); });
    append(ui.legend, pos.length ? [
      el("span", {}, PER_WORD + " (log) " + fmtBytes(Math.min.apply(null, pos)) + " "), bar,
      el("span", {}, " " + fmtBytes(Math.max.apply(null, pos))),
      el("span", { "class": "muted" }, "  ·  dashed: back edge closing the loop")
    ] : [el("span", { "class": "muted" }, "dashed: back edge closing the loop")]);
    if (D.flow) {
      var drv = D.flow.driver ? ownerById[D.flow.driver] : null, nDrv = 0;
      D.seams.forEach(function (s) { if (s.driver) nDrv++; });
      append(ui.legend, [el("div", { "class": "roles", id: "edge-key" }, [
        el("span", {}, "black arrow: data a stage made, used by a later one: payload · " + PER_WORD +
          " (the Flow table)"),
        D.seams.some(function (s) { return !s.driver && !s.undrawn; }) ?
          el("span", { "class": "muted" }, "faint line: a seam between two stages (its figure in the Seams table)") : null,
        drv ? el("span", { "class": "muted" }, "dashed white box: the driver, " + drv.name + ", which calls every stage (its " +
          nDrv + " seams are in the table, not drawn)") : null
      ])]);
    }
    // only the roles several boxes share are keyed: a box alone in its role says it by its
    // name, and keying every one took three lines of the graph's height
    var roles = [], count = {};
    D.owners.forEach(function (o) {
      if (!count[o.role]) { count[o.role] = 0; roles.push(o.role); }
      count[o.role]++;
    });
    ui.crowdNote = el("span", { "class": "muted", id: "crowd-note" });
    ui.legend.appendChild(ui.crowdNote);
    roles = roles.filter(function (r) { return count[r] > 1; });
    if (!roles.length) return;
    var key = el("div", { "class": "roles" }, [el("span", { "class": "muted" }, "boxes sharing a colour, by role: ")]);
    roles.forEach(function (r) {
      var sw = el("i", { "class": "swatch" }), hue = roleHue(r);
      sw.style.background = "hsl(" + hue + ",60%,93%)";
      sw.style.borderColor = "hsl(" + hue + ",45%,42%)";
      append(key, [el("span", { "class": "role", "data-role": r }, [sw, r + " ×" + count[r]])]);
    });
    ui.legend.appendChild(key);
  }
