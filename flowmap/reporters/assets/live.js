/* flowmap live page (`flowmap serve`): included into flowmap.js's closure only in the page the
 * server sends. It asks the server that sent the page for data newer than its own
 * (`data.json?after=VERSION`, same origin: the page's CSP allows `connect-src 'self'` and
 * nothing else; the server answers once the run's data changed, or after a while) and
 * draws the new data in place: the same page, the same view. */
  (function live() {
    var status;

    function showStatus() {
      status = el("div", { "class": D.live && D.live.state !== "running" ? "warn" : "muted", id: "live-status" },
        D.live ? D.live.sentence : "live");
      document.getElementById("top").appendChild(status);
      showRates();
    }

    // bytes/s over the last seconds, beside each seam's bytes per step (running only)
    function showRates() {
      var rates = D.live && D.live.bytes_per_s, head = document.querySelector("#seams thead tr");
      if (!rates || !head) return;
      head.insertBefore(el("th", {}, "bytes/s"), head.children[3]);
      Array.prototype.forEach.call(document.querySelectorAll("#seams tr[data-seam]"), function (row) {
        var bps = rates[row.getAttribute("data-seam")];
        row.insertBefore(el("td", { "class": "num live-rate" }, bps === undefined ? "" : fmtBytes(bps) + "/s"),
          row.children[3]);  // after hops: details.js updates cells 1 and 2
      });
    }

    function redraw(data) {
      var moved = ui.moved, kept = view;
      load(data);
      clear(document.body);
      ui = {};
      main();
      if (state.query) { ui.search.value = state.query; applyFilter(); }
      if (moved) { view = kept; ui.moved = true; applyView(); }
      showStatus();
    }

    function poll() {
      var asked = Date.now();
      fetch("data.json?after=" + (D.live ? D.live.version : 0), { cache: "no-store" }).then(function (r) {
        return r.ok ? r.json() : null;
      }).then(function (data) {
        if (data && data.live && (!D.live || data.live.version !== D.live.version)) redraw(data);
        setTimeout(poll, Math.max(0, 250 - (Date.now() - asked)));  // at most 4 asks a second
      }, function () {
        status.textContent = "the server stopped: this is the last data it sent";
        status.className = "warn";
      });
    }

    showStatus();
    setTimeout(poll, 0);
  })();
