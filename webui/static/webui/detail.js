// Shared by the pod, fleet, nodes and replay pages: colours from handoff-meta, escaping
// for Plotly hover text, fetching with the replay time, small DOM helpers.
(function () {
  "use strict";
  var meta = JSON.parse(document.getElementById("handoff-meta").textContent);
  var verdicts = {};
  meta.verdicts.forEach(function (v) { verdicts[v.name] = v; });
  var stages = {};
  meta.stages.forEach(function (s) { stages[s.name] = s; });

  // Plotly renders hover text as a little HTML: every string from the cluster goes
  // through this before it is put into a hover label.
  function esc(value) {
    return String(value === null || value === undefined ? "" : value)
      .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  // Elements are built with textContent only: nothing from the cluster becomes markup.
  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  function row(cells) {
    var tr = document.createElement("tr");
    cells.forEach(function (cell) {
      var td = document.createElement("td");
      if (cell instanceof Node) td.appendChild(cell); else td.textContent = cell === null || cell === undefined ? "" : String(cell);
      tr.appendChild(td);
    });
    return tr;
  }

  function badge(verdict) {
    var b = el("span", verdict, "verdict-badge");
    b.style.setProperty("--c", "var(--v-" + verdict + ")");
    b.dataset.verdict = verdict;
    return b;
  }

  function link(href, text) {
    var a = el("a", text);
    a.href = href;
    return a;
  }

  // The replay time (?at=) of this page, if any.
  function currentAt() {
    return new URLSearchParams(window.location.search).get("at");
  }

  function withAt(url, at) {
    var u = new URL(url, window.location.origin);
    if (at) u.searchParams.set("at", at); else u.searchParams.delete("at");
    return u.pathname + u.search;
  }

  // Pod pages are <prefix><namespace>/<name>/ (the board's data-pod-base convention).
  function podUrl(prefix, namespace, name, uid) {
    var url = prefix + encodeURIComponent(namespace) + "/" + encodeURIComponent(name) + "/";
    if (uid) url += "?uid=" + encodeURIComponent(uid);
    return withAt(url, currentAt());
  }

  function fetchJSON(url) {
    return fetch(withAt(url, currentAt()), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        return response.json().catch(function () { return {}; }).then(function (body) {
          if (!response.ok) throw new Error(body.error || ("HTTP " + response.status));
          return body;
        });
      });
  }

  function seconds(value) {
    if (value === null || value === undefined) return "–";
    if (value < 1) return (value * 1000).toFixed(0) + " ms";
    if (value < 120) return value.toFixed(2) + " s";
    if (value < 7200) return (value / 60).toFixed(1) + " min";
    return (value / 3600).toFixed(1) + " h";
  }

  function cssVar(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  // Plotly layout colours that follow the light/dark theme.
  function plotLayout(extra) {
    var layout = {
      paper_bgcolor: "rgba(0,0,0,0)",
      plot_bgcolor: "rgba(0,0,0,0)",
      font: { family: cssVar("--font") || "sans-serif", size: 12, color: cssVar("--text") || "#222" },
      margin: { l: 60, r: 20, t: 30, b: 40 },
      hoverlabel: { align: "left" },
    };
    Object.keys(extra || {}).forEach(function (k) { layout[k] = extra[k]; });
    return layout;
  }

  var plotConfig = {
    displaylogo: false,
    responsive: true,
    toImageButtonOptions: { format: "png", scale: 2 },
  };

  function status(root, text, isError) {
    var line = root.querySelector("[data-status]");
    if (!line) return;
    line.textContent = text;
    line.classList.toggle("error", !!isError);
  }

  // Pages redraw when the replay time moves (replay.js dispatches handoff:at).
  function onTime(callback) {
    document.addEventListener("handoff:at", function () { callback(); });
  }

  window.HandoffDetail = {
    meta: meta, verdicts: verdicts, stages: stages, esc: esc, el: el, row: row, badge: badge,
    link: link, currentAt: currentAt, withAt: withAt, podUrl: podUrl, fetchJSON: fetchJSON,
    seconds: seconds, plotLayout: plotLayout, plotConfig: plotConfig, status: status,
    onTime: onTime,
  };
})();
