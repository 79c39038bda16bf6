/* flowmap HTML view: selection, the details panel, findings and the seam list. Included into flowmap.js's closure by
 * flowmap.reporters.html (at its `@include details.js` line): it shares that closure's
 * state (D, state, view, ui) and helpers. */
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
        [PER_WORD + ranged, fmtBytes(seamBps(s)) + (fullRange() ? "  (max " + fmtBytes(s.bytes_per_step_max) + ")" : "")],
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
      tip(r, "steps " + D.bins[i][0] + "–" + D.bins[i][1] + ": " + fmtBytes(v) + PER);
      svg.appendChild(r);
    });
    svg.appendChild(sv("text", { x: 0, y: H + 13, "class": "axis" }, "step " + D.bins[0][0]));
    svg.appendChild(sv("text", { x: W, y: H + 13, "class": "axis", "text-anchor": "end" }, "step " + D.bins[n - 1][1] + " · max " + fmtBytes(max) + PER));
    return svg;
  }

  function ownerDetails(o) {
    var sum = function (list, f) { return list.reduce(function (a, s) { return a + f(s); }, 0); };
    var ranged = !fullRange();
    var bin = function (s) { return inRange(s.bin_bytes); };
    // totals, where a seam's figures are per step: say over what
    var over = ranged ? " in the chosen steps" : " over the whole run";
    append(ui.details, [
      el("h2", {}, [el("span", { "class": "kind" }, "owner"), o.name]),
      kv([
        ["role", o.role],
        [o.pids.length === 1 ? "pid" : "pids", o.pids.length ? o.pids.join(", ") : "–"],
        o.hosts && o.hosts.length ? [o.hosts.length === 1 ? "host" : "hosts", o.hosts.join(", ")] : null,
        ["bytes in", fmtBytes(ranged ? sum(o.ins, bin) : o.bytes_in) + " · " + hopsText(ranged ? sum(o.ins, seamHops) : o.hops_in) + over],
        ["bytes out", fmtBytes(ranged ? sum(o.outs, bin) : o.bytes_out) + " · " + hopsText(ranged ? sum(o.outs, seamHops) : o.hops_out) + over],
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
        el("td", { "class": "num" }, fmtBytes(seamBps(s)) + PER)
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
    var head = el("thead", {}, el("tr", {}, ["seam", PER_WORD, "hops", "transport"].map(function (h) { return el("th", {}, h); })));
    return el("section", { id: "seams" }, [flowList(), el("h2", {}, "Seams"), el("table", { "class": "grid seams" }, [head, ui.tbody])]);
  }

  // The black arrows of the graph, one row each, with the figure the arrow's label shows.
  function flowList() {
    if (!D.flow || !D.flow.edges.length) return null;
    var rows = D.flow.edges.map(function (f) {
      return el("tr", { "data-flow": f.id }, [
        el("td", { "class": "label" }, ownerById[f.src].name + " → " + ownerById[f.dst].name + " : " + f.short),
        el("td", { "class": "num" }, flowFigure(f)), el("td", { "class": "num" }, String(f.hops))
      ]);
    });
    var head = el("thead", {}, el("tr", {}, ["flow edge (black arrow)", PER_WORD, "hops"].map(function (h) { return el("th", {}, h); })));
    return el("div", { id: "flow-table" }, [el("h2", {}, "Flow"), el("table", { "class": "grid seams" }, [head, el("tbody", {}, rows)])]);
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
