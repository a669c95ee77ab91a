// The nodes page: readiness history as a Gantt of NotReady intervals, each node's taints and
// the pods handed to it by verdict (linking to the board filtered by ?node=), and the pods
// whose nodeName names no node.
(function () {
  "use strict";
  var H = window.HandoffDetail;
  var root = document.getElementById("nodes-root");
  if (!root || !H) return;

  function boardLink(params) {
    var url = new URL(root.dataset.board, window.location.origin);
    Object.keys(params).forEach(function (k) { url.searchParams.set(k, params[k]); });
    return H.withAt(url.pathname + url.search, H.currentAt());
  }

  function taints(list) {
    return (list || []).map(function (t) { return t.key + (t.value ? "=" + t.value : "") + ":" + t.effect; }).join(", ") || "–";
  }

  function missing(data) {
    var card = root.querySelector("[data-missing-card]");
    var body = card.querySelector("tbody");
    body.textContent = "";
    card.hidden = !data.missing.length;
    data.missing.forEach(function (group) {
      group.pods.forEach(function (p) {
        var gc = p.podgc ? p.podgc.earliest.replace("T", " ").slice(0, 19) + " – " + p.podgc.latest.replace("T", " ").slice(11, 19) : "–";
        body.appendChild(H.row([H.el("span", group.node, "node missing"), H.link(H.podUrl(root.dataset.podBase, p.namespace, p.name, p.uid), p.namespace + "/" + p.name),
          H.badge(p.verdict), p.binding || "–", p.created || "–", gc]));
      });
    });
  }

  function table(data) {
    var body = root.querySelector('[data-testid="nodes"] tbody');
    body.textContent = "";
    data.nodes.forEach(function (n) {
      var name = H.el("span", n.name, n.exists ? "" : "node missing");
      var ready = n.deleted ? "deleted " + n.deleted : (n.known ? (n.ready || "?") : "never seen");
      if (n.unschedulable) ready += " · cordoned";
      var down = n.down.map(function (d) { return (d.from || "?").slice(11, 19) + "–" + (d.to ? d.to.slice(11, 19) : "now") + " " + d.why; }).join("; ") || "–";
      var verdicts = document.createElement("span");
      Object.keys(n.verdicts).forEach(function (v) {
        var a = H.link(boardLink({ node: n.name, verdict: v }), "");
        a.appendChild(H.badge(v));
        a.appendChild(document.createTextNode(" " + n.verdicts[v]));
        a.className = "verdict-count";
        verdicts.appendChild(a);
      });
      var tr = H.row([name, ready, taints(n.taints), down, H.link(boardLink({ node: n.name }), String(n.pods)), verdicts]);
      if (!n.exists || n.ready !== "True") tr.className = "warning";
      body.appendChild(tr);
    });
  }

  // Each watched node: a green bar over the window, NotReady/Unknown intervals over it in
  // the node-lost colour. The window reaches back ten minutes, or to the first outage.
  function readiness(data) {
    var nodes = data.nodes.filter(function (n) { return n.known; });
    var end = new Date(data.evaluated_at || Date.now()).getTime();
    var start = end - 10 * 60 * 1000;
    nodes.forEach(function (n) { n.down.forEach(function (d) { if (d.from) start = Math.min(start, new Date(d.from).getTime()); }); });
    var names = nodes.map(function (n) { return H.esc(n.name); });
    var up = { x: [], y: [], base: [], text: [] }, down = { x: [], y: [], base: [], text: [] };
    nodes.forEach(function (n, i) {
      var stop = n.deleted ? new Date(n.deleted).getTime() : end;
      up.y.push(names[i]); up.base.push(start); up.x.push(Math.max(1, stop - start));
      up.text.push(names[i] + "<br>" + (n.deleted ? "deleted " + H.esc(n.deleted) : "Ready=" + H.esc(n.ready || "?")));
      n.down.forEach(function (d) {
        var from = new Date(d.from).getTime(), to = d.to ? new Date(d.to).getTime() : stop;
        down.y.push(names[i]); down.base.push(from); down.x.push(Math.max(1, to - from));
        down.text.push(names[i] + "<br>" + H.esc(d.why) + "<br>" + H.esc(d.from) + " → " + H.esc(d.to || "now"));
      });
    });
    var bar = function (series, name, colour) {
      return { type: "bar", orientation: "h", name: name, y: series.y, x: series.x, base: series.base, text: series.text,
        hoverinfo: "text", textposition: "none", marker: { color: colour } };
    };
    window.Plotly.react("nodes-readiness", [bar(up, "Ready", H.verdicts.running.colour), bar(down, "NotReady / Unknown", H.verdicts["node-lost"].colour)],
      H.plotLayout({ height: Math.max(200, 26 * nodes.length + 90), barmode: "overlay", bargap: 0.35,
        xaxis: { type: "date" }, yaxis: { type: "category", categoryorder: "array", categoryarray: names.slice().reverse(), automargin: true },
        legend: { orientation: "h", y: -0.2 } }), H.plotConfig);
  }

  function load() {
    H.fetchJSON(root.dataset.api).then(function (data) {
      var count = data.missing.reduce(function (n, g) { return n + g.count; }, 0);
      H.status(root, data.nodes.length + " nodes as of " + (data.evaluated_at || "now") + (count ? " · " + count + " pods name a node that does not exist" : ""));
      missing(data);
      table(data);
      readiness(data);
      root.dataset.loaded = String(data.nodes.length);
    }).catch(function (err) { H.status(root, err.message, true); root.dataset.loaded = "error"; });
  }

  H.onTime(load);
  load();
})();
