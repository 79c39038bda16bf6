/* flowmap HTML view: where each edge label goes. Included into flowmap.js's closure by
 * flowmap.reporters.html (at its `@include labels.js` line), after graph.js. */
  // --- edge labels ------------------------------------------------------------------

  // An edge label is drawn at 11 CSS px or more at every zoom, so below 1:1 it outgrows the
  // room the layout kept for it, and where it was kept many labels overlapped: a first view
  // of 24 arrows showed none. So each label looks for a place on its own line where it
  // overlaps no box and no other label: where the layout put it (snug beside its line, then
  // as placed), then along its edge from the middle out, centred on the line or beside it;
  // as name over figure, then as one line.
  // Black flow edges go first, then the heaviest seams. Places that cross no other edge's
  // line are tried first; that arrangement is kept unless the plain one shows more labels.
  // A label with no place is hidden, and the legend says how many (hovering the edge,
  // zooming in or panning shows it). Measured on screen, at every zoom.
  var ALONG = [0.5, 0.38, 0.62, 0.27, 0.73, 0.18, 0.82, 0.1, 0.9];
  var LABEL_GAP_PX = 2;  // on screen, between a label and what is next to it
  var MAX_LINE_AWARE = 150, DOT_CELL_PX = 32, RESEAT_ROUNDS = 3;

  function declutter() {
    if (!ui.labels) return;
    var panel = ui.graph.getBoundingClientRect(), boxes = [];
    Object.keys(ui.nodes).forEach(function (k) {
      boxes.push(ui.nodes[k].querySelector("rect").getBoundingClientRect());
      boxes.push(ui.nodes[k].querySelector("text").getBoundingClientRect());
    });
    var order = ui.labels.filter(function (l) {
      l.text.classList.remove("crowded");
      return !(l.seam && ui.edges[l.seam.id].g.classList.contains("dim"));  // filtered out: left as is
    }).sort(function (a, b) {
      return a.rank - b.rank || labelBytes(b) - labelBytes(a);
    });
    // each label's box at home in both forms: all moved, then all read (one layout, not one each)
    [false, true].forEach(function (oneLine, form) {
      order.forEach(function (l) { setLabel(l, l.home[0], l.home[1], oneLine); });
      order.forEach(function (l) {
        var r = l.text.getBoundingClientRect();
        (l.size = l.size || [])[form] = r.width ? { left: r.left, right: r.right, top: r.top, bottom: r.bottom } : null;
      });
    });
    // (a graph of hundreds of labels gets the plain arrangement only: a wheel turn redoes this)
    var dots = order.length <= MAX_LINE_AWARE ? lineDots(order, panel) : null;
    var best = reseat(order, arrangeBest(order, boxes, panel, dots), boxes, panel, dots), hidden = 0;
    order.forEach(function (l, i) {
      var at = best[i] || { x: l.home[0], y: l.home[1], one: false };
      setLabel(l, at.x, at.y, at.one);
      if (!best[i]) { l.text.classList.add("crowded"); hidden++; }
    });
    ui.crowded = hidden;
    if (ui.crowdNote) ui.crowdNote.textContent = hidden ? hidden + " of " + order.length +
      " edge labels hidden where they would overlap: hover an edge, zoom in or press 1:1 to see them; " +
      "every figure is in the " + (D.flow ? "Flow" : "Seams") + " table" : "";
  }

  function shownCount(places) { return places.filter(Boolean).length; }

  // Places that cross no other edge's line where there are such (`dots`), unless the plain
  // arrangement shows more labels.
  function arrangeBest(labels, boxes, panel, dots) {
    var plain = arrange(labels, boxes, panel, null);
    var clear = dots ? arrange(labels, boxes, panel, dots) : plain;
    return shownCount(plain) > shownCount(clear) ? plain : clear;
  }

  // Greedy placement can leave a label out that a heavier one's first choice blocked, though
  // both had room: the labels left out choose first, for a few rounds, while that shows more.
  function reseat(order, best, boxes, panel, dots) {
    for (var round = 0; round < RESEAT_ROUNDS && shownCount(best) < order.length; round++) {
      var first = [], rest = [];
      order.forEach(function (l, i) { (best[i] ? rest : first).push(i); });
      var turn = first.concat(rest), labels = turn.map(function (i) { return order[i]; });
      var got = arrangeBest(labels, boxes, panel, dots), places = [];
      turn.forEach(function (i, j) { places[i] = got[j]; });
      if (shownCount(places) <= shownCount(best)) break;
      best = places;
    }
    return best;
  }

  // Each label's place ({x, y, one}) in `order`, or null: the first place where its box on
  // screen overlaps no box nor a label placed before it, stays inside the panel on the opening
  // view, and (with `dots`, where there is such a place) covers no other edge's line.
  function arrange(order, boxes, panel, dots) {
    var taken = boxes.slice(), g = LABEL_GAP_PX;
    function free(r) {
      if (!ui.moved && (r.left < panel.left || r.right > panel.right || r.top < panel.top || r.bottom > panel.bottom)) {
        return false;  // the opening view shows whole labels only; once moved, one may run past the edge
      }
      return !taken.some(function (t) {
        return r.left - g < t.right && t.left < r.right + g && r.top - g < t.bottom && t.top < r.bottom + g;
      });
    }
    return order.map(function (l) {
      var at = null;
      if (dots) {
        at = findPlace(l, function (r) {
          return free(r) && !dots.crosses(r, l);
        });
      }
      at = at || findPlace(l, free);
      if (at) taken.push(at.r);
      return at;
    });
  }

  // The first place, in the order above, where `ok` holds for the label's box on screen:
  // nearer places in either form before farther ones.
  function findPlace(l, ok) {
    var k = view.k, home = l.home;
    for (var ring = 0; ring < RINGS; ring++) {
      for (var form = 0; form < 2; form++) {
        var r0 = l.size[form];  // its box on screen, drawn at home in this form
        if (!r0) continue;
        var spots = labelSpots(l, (r0.right - r0.left) / k, (r0.bottom - r0.top) / k, (LABEL_GAP_PX + 2) / k, ring);
        for (var i = 0; i < spots.length; i++) {
          var dx = (spots[i][0] - home[0]) * k, dy = (spots[i][1] - home[1]) * k;
          var r = { left: r0.left + dx, right: r0.right + dx, top: r0.top + dy, bottom: r0.bottom + dy };
          if (ok(r)) return { x: spots[i][0], y: spots[i][1], one: form === 1, r: r };
        }
      }
    }
    return null;
  }

  // Where the label may stand (its anchor, layout px), ring by ring (`w`, `h` its size, `gap`
  // the space to the line). Ring 0: beside its line where the layout put it (the layout kept
  // room for the widest figure: centred in it, a short label stood apart from its line),
  // home, then points of its own line, the label centred on each or beside it. Ring 1: above
  // or below those points, or at their corners: short edges side by side, as one batch sent
  // to two ranks, have room only there. Ring 2: as ring 1, a label's size farther out.
  var RINGS = 3;
  function labelSpots(l, w, h, gap, ring) {
    if (!l.along) {
      var n = l.line.getTotalLength();
      l.along = n > 0 ? ALONG.map(function (f) { var p = l.line.getPointAtLength(n * f); return [p.x, p.y]; }) : [];
    }
    var out = [];
    if (ring === 0) {
      var home = l.home, near = null;
      ownDots(l).forEach(function (p) {
        var d = Math.abs(p[0] - home[0]) + Math.abs(p[1] - home[1]);
        if (!near || d < near.d) near = { d: d, x: p[0] };
      });
      if (near) out.push([near.x + (near.x <= home[0] ? 1 : -1) * (w / 2 + gap), home[1]]);
      out.push(home);
      l.along.forEach(function (p) {
        out.push(p, [p[0] + w / 2 + gap, p[1]], [p[0] - w / 2 - gap, p[1]]);
      });
      return out;
    }
    var dx = ring * (w / 2 + gap), dy = ring * (h / 2 + gap);
    l.along.forEach(function (p) {
      out.push([p[0], p[1] - dy], [p[0], p[1] + dy]);
    });
    l.along.forEach(function (p) {
      out.push([p[0] + dx, p[1] - dy], [p[0] - dx, p[1] - dy], [p[0] + dx, p[1] + dy], [p[0] - dx, p[1] + dy]);
    });
    if (ring > 1) {
      l.along.forEach(function (p) { out.push([p[0] + dx, p[1]], [p[0] - dx, p[1]]); });
    }
    return out;
  }

  // Points along every labelled edge's line, on screen, in cells of DOT_CELL_PX: a label
  // over one of another edge's points crosses that edge (`crosses`).
  function lineDots(labels, panel) {
    var cells = {};
    function key(cx, cy) { return cx + "," + cy; }
    labels.forEach(function (l) {
      ownDots(l).forEach(function (p) {
        var x = panel.left + view.x + p[0] * view.k, y = panel.top + view.y + p[1] * view.k;
        var c = key(Math.floor(x / DOT_CELL_PX), Math.floor(y / DOT_CELL_PX));
        (cells[c] = cells[c] || []).push({ l: l, x: x, y: y });
      });
    });
    return { crosses: function (r, l) {
      for (var cx = Math.floor(r.left / DOT_CELL_PX); cx <= Math.floor(r.right / DOT_CELL_PX); cx++) {
        for (var cy = Math.floor(r.top / DOT_CELL_PX); cy <= Math.floor(r.bottom / DOT_CELL_PX); cy++) {
          var ds = cells[key(cx, cy)] || [];
          for (var i = 0; i < ds.length; i++) {
            var d = ds[i];
            if (d.l !== l && d.x > r.left && d.x < r.right && d.y > r.top && d.y < r.bottom) return true;
          }
        }
      }
      return false;
    } };
  }

  // Points along the label's own line, layout px, some 8 px apart (at most 81).
  function ownDots(l) {
    if (!l.dots) {
      var n = l.line.getTotalLength(), steps = Math.max(2, Math.min(80, Math.ceil(n / 8)));
      l.dots = [];
      for (var i = 0; i <= steps; i++) { var p = l.line.getPointAtLength(n * i / steps); l.dots.push([p.x, p.y]); }
    }
    return l.dots;
  }

  // The label at (x, y): its name over its figure, or both on one line (`oneLine`).
  function setLabel(l, x, y, oneLine) {
    var spans = l.text.querySelectorAll("tspan");
    l.text.setAttribute("x", x);
    l.text.setAttribute("y", y);
    spans[0].setAttribute("x", x);
    spans[0].setAttribute("dy", oneLine ? "0.35em" : "-0.3em");
    if (oneLine) {
      spans[1].removeAttribute("x");
      spans[1].setAttribute("dy", "0");
      spans[1].setAttribute("dx", "0.4em");
    } else {
      spans[1].setAttribute("x", x);
      spans[1].setAttribute("dy", "1.25em");
      spans[1].removeAttribute("dx");
    }
  }

  function labelBytes(l) { return l.seam ? seamBps(l.seam) : l.bytes; }
