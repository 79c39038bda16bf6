/* flowmap HTML view: the counter charts. Included into flowmap.js's closure by
 * flowmap.reporters.html (at its `@include charts.js` line): it shares that closure's
 * state (D, state, view, ui) and helpers. */
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
