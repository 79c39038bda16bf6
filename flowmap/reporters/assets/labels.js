/* flowmap HTML view: where each edge label goes. Included into flowmap.js's closure by
 * flowmap.reporters.html (at its `@include labels.js` line), after graph.js. */
  // --- edge labels ------------------------------------------------------------------

  // An edge label is drawn at 11 CSS px or more at every zoom, so below 1:1 it outgrows the
  // room the layout kept for it, and where it was kept many labels overlapped: a first view
  // of 24 arrows showed none. So each label looks for a place on its own line where it
  // overlaps no box and no other label: the layout's place first, then along its edge from
  // the middle out, centred on the line or beside it; as name over figure, then as one line.
  // Black flow edges go first, then the heaviest seams. A label with no such place is
  // hidden, and the legend says how many (hovering the edge, zooming in or panning shows it).
  // Measured on screen, at every zoom.
  var ALONG = [0.5, 0.38, 0.62, 0.27, 0.73, 0.18, 0.82, 0.1, 0.9];
  var LABEL_GAP_PX = 2;  // on screen, between a label and what is next to it

  function declutter() {
    if (!ui.labels) return;
    var panel = ui.graph.getBoundingClientRect(), taken = [], hidden = 0, shown = 0;
    function free(r) {
      if (!ui.moved && (r.left < panel.left || r.right > panel.right || r.top < panel.top || r.bottom > panel.bottom)) {
        return false;  // the opening view shows whole labels only; once moved, one may run past the edge
      }
      var g = LABEL_GAP_PX;
      return !taken.some(function (t) {
        return r.left - g < t.right && t.left < r.right + g && r.top - g < t.bottom && t.top < r.bottom + g;
      });
    }
    Object.keys(ui.nodes).forEach(function (k) {
      taken.push(ui.nodes[k].querySelector("rect").getBoundingClientRect());
      taken.push(ui.nodes[k].querySelector("text").getBoundingClientRect());
    });
    var order = ui.labels.slice().sort(function (a, b) {
      return a.rank - b.rank || labelBytes(b) - labelBytes(a);
    });
    order.forEach(function (l) {
      l.text.classList.remove("crowded");
      if (l.seam && ui.edges[l.seam.id].g.classList.contains("dim")) return;
      var r = placeLabel(l, free);
      if (r) { taken.push(r); shown++; } else { l.text.classList.add("crowded"); hidden++; }
    });
    ui.crowded = hidden;
    if (ui.crowdNote) ui.crowdNote.textContent = hidden ? hidden + " of " + (hidden + shown) +
      " edge labels hidden where they would overlap: hover an edge, zoom in or press 1:1 to see them; " +
      "every figure is in the " + (D.flow ? "Flow" : "Seams") + " table" : "";
  }

  // The first place, in the order above, where `free` holds for the label's box on screen:
  // that box, with the label moved there; null (the label back home) when there is none.
  function placeLabel(l, free) {
    var k = view.k, home = l.home;
    for (var form = 0; form < 2; form++) {
      setLabel(l, home[0], home[1], form === 1);
      var r0 = l.text.getBoundingClientRect();
      if (!r0.width) continue;
      var spots = labelSpots(l, r0.width / k, (LABEL_GAP_PX + 2) / k);
      for (var i = 0; i < spots.length; i++) {
        var dx = (spots[i][0] - home[0]) * k, dy = (spots[i][1] - home[1]) * k;
        var r = { left: r0.left + dx, right: r0.right + dx, top: r0.top + dy, bottom: r0.bottom + dy };
        if (free(r)) {
          setLabel(l, spots[i][0], spots[i][1], form === 1);
          return r;
        }
      }
    }
    setLabel(l, home[0], home[1], false);
    return null;
  }

  // Where the label may stand (its anchor, layout px): home, then points of its own line, the
  // label centred on each or beside it (`w` its width, `gap` the space to the line).
  function labelSpots(l, w, gap) {
    if (!l.along) {
      var n = l.line.getTotalLength();
      l.along = n > 0 ? ALONG.map(function (f) { var p = l.line.getPointAtLength(n * f); return [p.x, p.y]; }) : [];
    }
    var out = [l.home];
    l.along.forEach(function (p) {
      out.push(p, [p[0] + w / 2 + gap, p[1]], [p[0] - w / 2 - gap, p[1]]);
    });
    return out;
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
