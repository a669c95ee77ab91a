// The pod page: one pod's handoff as a Plotly timeline (stage bars, a marker per event and
// per watch update, blind intervals), the verdict in words, admission numbers, raw events.
(function () {
  "use strict";
  var H = window.HandoffDetail;
  var root = document.getElementById("pod-root");
  if (!root || !H) return;
  var chart = document.getElementById("pod-chart");
  var countdown = null;
  var shown = null; // the view last drawn, as JSON

  // Long messages are wrapped for the hover box: split first, then escape each piece.
  function wrap(text, width) {
    var words = String(text || "").split(/\s+/), lines = [], line = "";
    words.forEach(function (word) {
      while (word.length > width) { lines.push(line + word.slice(0, width - line.length)); word = word.slice(width - line.length); line = ""; }
      if ((line + " " + word).trim().length > width) { lines.push(line); line = word; } else { line = (line + " " + word).trim(); }
    });
    if (line) lines.push(line);
    return lines.map(H.esc).join("<br>");
  }

  function ms(a, b) { return new Date(b).getTime() - new Date(a).getTime(); }

  function fmt(iso) { return iso ? iso.replace("T", " ").replace("Z", "") : "–"; }

  function stageTraces(view) {
    return (view.stages || []).map(function (bar) {
      var stage = H.stages[bar.name] || { label: bar.name, colour: "#999" };
      var took = ms(bar.start, bar.end) / 1000;
      return {
        type: "bar", orientation: "h", name: stage.label, legendgroup: "stages",
        y: ["stages"], base: [bar.start], x: [Math.max(ms(bar.start, bar.end), 1)],
        marker: { color: stage.colour, opacity: bar.open ? 0.65 : 1, line: { width: 0 } },
        hoverinfo: "text",
        hovertext: ["<b>" + H.esc(stage.label) + "</b>" + (bar.open ? " (still in it)" : "") +
          "<br>" + H.esc(fmt(bar.start)) + " → " + H.esc(fmt(bar.end)) + "<br>" + H.esc(H.seconds(took))],
      };
    });
  }

  function eventTrace(events, type, colour, symbol) {
    var chosen = events.filter(function (e) { return (e.type === "Warning") === (type === "Warning"); });
    return {
      type: "scatter", mode: "markers", name: type + " events", y: chosen.map(function () { return "events"; }),
      x: chosen.map(function (e) { return e.first; }),
      marker: { color: colour, size: 11, symbol: symbol, line: { width: 1, color: "#fff" } },
      hoverinfo: "text",
      hovertext: chosen.map(function (e) {
        var source = [e.source, e.host].filter(Boolean).join(" on ");
        return "<b>" + H.esc(e.reason) + "</b> (" + H.esc(e.type) + ")" +
          "<br>source: " + H.esc(source || "–") + " · count: " + H.esc(e.count) +
          "<br>" + H.esc(fmt(e.first)) + (e.last && e.last !== e.first ? " … " + H.esc(fmt(e.last)) : "") +
          "<br>" + wrap(e.message, 90);
      }),
    };
  }

  function changeTrace(changes) {
    return {
      type: "scatter", mode: "markers", name: "watch updates", y: changes.map(function () { return "watch updates"; }),
      x: changes.map(function (c) { return c.at; }),
      marker: { color: "#5b6572", size: 10, symbol: "diamond" },
      hoverinfo: "text",
      hovertext: changes.map(function (c) { return "<b>watch update</b> " + H.esc(fmt(c.at)) + "<br>" + wrap(c.what, 90); }),
    };
  }

  function spanTrace(name, row, start, end, colour, text) {
    return {
      type: "bar", orientation: "h", name: name, y: [row], base: [start], x: [Math.max(ms(start, end), 1)],
      marker: { color: colour, opacity: 0.5, pattern: { shape: "/", fgcolor: colour, solidity: 0.4 } },
      hoverinfo: "text", hovertext: [text],
    };
  }

  function draw(view) {
    var traces = stageTraces(view);
    var rows = ["stages", "events", "watch updates"];
    traces.push(eventTrace(view.events || [], "Normal", "#1f77b4", "circle"));
    traces.push(eventTrace(view.events || [], "Warning", "#d62728", "triangle-up"));
    traces.push(changeTrace(view.changes || []));
    var blind = view.deleted_blind;
    if (blind && blind.from && blind.to) {
      traces.push(spanTrace("blind (watch gap)", "watch updates", blind.from, blind.to, "#888",
        "<b>watch blind</b> (" + H.esc(blind.stream) + ")<br>" + H.esc(fmt(blind.from)) + " → " + H.esc(fmt(blind.to)) +
        "<br>the pod was deleted some time in this gap"));
    }
    (view.watch_gaps || []).forEach(function (gap) {
      traces.push(spanTrace("watch blind (" + H.esc(gap.stream) + ")", "watch updates", gap.from, gap.to, "#888",
        "<b>watch blind</b> (" + H.esc(gap.stream) + " stream relisted)<br>" + H.esc(fmt(gap.from)) + " → " + H.esc(fmt(gap.to)) +
        "<br>changes in this gap were not seen as they happened"));
    });
    if (view.podgc) {
      rows.push("PodGC");
      traces.push(spanTrace("PodGC window", "PodGC", view.podgc.earliest, view.podgc.latest, H.verdicts["podgc-deleted"].colour,
        "<b>PodGC force-deletion window</b><br>" + H.esc(fmt(view.podgc.earliest)) + " → " + H.esc(fmt(view.podgc.latest))));
    }
    var layout = H.plotLayout({
      barmode: "overlay", height: 300, showlegend: true,
      legend: { orientation: "h", y: -0.25 },
      xaxis: { type: "date", title: { text: "time (UTC)" } },
      yaxis: { type: "category", categoryorder: "array", categoryarray: rows.slice().reverse(), automargin: true },
      margin: { l: 110, r: 20, t: 10, b: 60 },
    });
    var config = Object.assign({}, H.plotConfig, { toImageButtonOptions: { format: "png", scale: 2, filename: (view.namespace + "_" + view.name).replace(/[^A-Za-z0-9_.-]/g, "_") } });
    window.Plotly.react(chart, traces, layout, config);
  }

  function facts(view) {
    var box = root.querySelector("[data-pod-facts]");
    box.textContent = "";
    box.appendChild(H.badge(view.verdict));
    if (view.reason) box.appendChild(H.el("span", view.reason, "reason"));
    var node = H.el("span", "node: " + (view.node || "none"), view.node_exists === false ? "node missing" : "node");
    if (view.node_exists === false) node.title = "no Node object with this name exists";
    box.appendChild(node);
    box.appendChild(H.el("span", "binding: " + (view.binding || "–"), "binding"));
    if (view.owner) {
      var workload = view.owner.workload ? " (" + view.owner.workload.kind + "/" + view.owner.workload.name + ")" : "";
      box.appendChild(H.el("span", "owner: " + view.owner.kind + "/" + view.owner.name + workload));
    }
    if (view.uid) box.appendChild(H.el("span", "uid " + view.uid, "mono small muted"));
  }

  function explanation(view) {
    root.querySelector("[data-verdict-card]").hidden = false;
    var card = root.querySelector("[data-verdict-card]");
    card.style.setProperty("--c", "var(--v-" + view.verdict + ")");
    root.querySelector("[data-explanation]").textContent = view.explanation || "";
    var rej = root.querySelector("[data-rejection]");
    var body = rej.querySelector("tbody");
    body.textContent = "";
    rej.hidden = !view.rejection;
    if (view.rejection) {
      var r = view.rejection;
      var free = (r.capacity !== undefined && r.used !== undefined) ? r.capacity - r.used : null;
      body.appendChild(H.row([r.reason, r.resource || "–", num(r.requested), num(r.used), num(r.capacity), num(free)]));
      root.querySelector("[data-rejection-message]").textContent = r.message || "";
    }
    var podgc = root.querySelector("[data-podgc]");
    podgc.hidden = !(view.podgc && view.verdict !== "podgc-deleted");
    if (countdown) { clearInterval(countdown); countdown = null; }
    if (!podgc.hidden) {
      var tick = function () {
        var now = H.currentAt() ? new Date(H.currentAt()).getTime() : Date.now();
        var a = (new Date(view.podgc.earliest).getTime() - now) / 1000;
        var b = (new Date(view.podgc.latest).getTime() - now) / 1000;
        podgc.textContent = b < 0
          ? "PodGC's deletion window (" + fmt(view.podgc.earliest) + " – " + fmt(view.podgc.latest) + ") has passed."
          : "PodGC force-deletes it between " + fmt(view.podgc.earliest) + " and " + fmt(view.podgc.latest) +
            " (in " + Math.max(0, a).toFixed(0) + "–" + b.toFixed(0) + " s).";
      };
      tick();
      if (!H.currentAt()) countdown = setInterval(tick, 1000);
    }
    var same = root.querySelector("[data-same-name]");
    same.textContent = "";
    same.hidden = !(view.same_name && view.same_name.length);
    if (!same.hidden) {
      same.appendChild(H.el("span", "Other pods with this name: "));
      view.same_name.forEach(function (o) {
        same.appendChild(H.link(H.podUrl(root.dataset.podBase, view.namespace, view.name, o.uid), (o.created || "?") + " (" + o.verdict + ")"));
        same.appendChild(document.createTextNode(" "));
      });
    }
  }

  function num(x) { return x === null || x === undefined ? "–" : Number(x).toLocaleString("en-US"); }

  function tables(view) {
    var events = root.querySelector('[data-testid="events"] tbody');
    events.textContent = "";
    (view.events || []).forEach(function (e) {
      var tr = H.row([fmt(e.first), fmt(e.last), e.type, e.reason, [e.source, e.host].filter(Boolean).join(" on "), e.count, e.message]);
      if (e.type === "Warning") tr.className = "warning";
      events.appendChild(tr);
    });
    if (!(view.events || []).length) events.appendChild(H.row(["", "", "", "no events", "", "", ""]));
    var changes = root.querySelector('[data-testid="changes"] tbody');
    changes.textContent = "";
    (view.changes || []).forEach(function (c) { changes.appendChild(H.row([fmt(c.at), c.what])); });
    var milestones = root.querySelector('[data-testid="milestones"] tbody');
    milestones.textContent = "";
    Object.keys(view.milestones || {}).forEach(function (k) {
      if (view.milestones[k]) milestones.appendChild(H.row([k.replace(/_/g, " "), fmt(view.milestones[k])]));
    });
    var durations = root.querySelector('[data-testid="durations"] tbody');
    durations.textContent = "";
    Object.keys(view.durations || {}).forEach(function (k) {
      durations.appendChild(H.row([k.replace(/_/g, " → ").replace(" → to → ", " → "), H.seconds(view.durations[k])]));
    });
  }

  function load() {
    H.fetchJSON(root.dataset.api).then(function (view) {
      var seen = JSON.stringify(view);
      if (seen === shown) return; // unchanged: keep the chart (and any hover) as it is
      shown = seen;
      if (view.uid) ws.uid = view.uid;
      H.status(root, "As of " + (H.currentAt() || "now") + (view.deleted_blind ? " · deleted while the watch was blind" : ""));
      facts(view);
      explanation(view);
      tables(view);
      draw(view);
      root.dataset.loaded = view.verdict;
    }).catch(function (err) {
      H.status(root, err.message, true);
      shown = null;
      root.dataset.loaded = "error";
      if (window.Plotly) window.Plotly.purge(chart);
    });
  }

  // ------------------------------------------------------------- live
  // A live pod moves on by itself (awaiting-kubelet → stuck → podgc-deleted): the page
  // follows the cluster's websocket as the board does (same hello / cursor / resume
  // protocol, docs/api.md) and refetches the pod only when a message names it, a burst
  // asks every page to refresh, or the server says to reload. No polling.
  var ws = { socket: null, cursor: null, retries: 0, uid: null };

  function mine(rows, removed) {
    var ns = root.dataset.namespace, name = root.dataset.name;
    return (rows || []).some(function (r) {
      return (ws.uid && r.uid === ws.uid) || (r.namespace === ns && r.name === name);
    }) || (ws.uid !== null && (removed || []).indexOf(ws.uid) >= 0);
  }

  function newer(a, b) {
    var x = String(a || "0-0").split("-").map(Number), y = String(b || "0-0").split("-").map(Number);
    return x[0] > y[0] || (x[0] === y[0] && x[1] > y[1]);
  }

  function live(state, text) {
    root.dataset.live = state;
    var box = root.querySelector("[data-live]");
    if (box) box.textContent = text;
  }

  function receive(message) {
    var data = message.data || {};
    if (message.type === "hello") {
      // The first hello: load again once joined, so no change between the page's first
      // load and the join is lost (an unchanged pod is not redrawn).
      if (!ws.cursor) { ws.cursor = data.cursor; load(); }
    } else if (message.type === "cluster.update" || message.type === "resume") {
      if (data.refresh || mine(data.pods, data.removed)) load();
      if (!data.more && data.cursor && (!ws.cursor || newer(data.cursor, ws.cursor))) ws.cursor = data.cursor;
      root.dataset.cursor = ws.cursor || "";
    } else if (message.type === "reload") {
      ws.cursor = data.cursor;
      load();
    }
  }

  function connect() {
    var scheme = location.protocol === "https:" ? "wss:" : "ws:";
    var query = ws.cursor ? "?cursor=" + encodeURIComponent(ws.cursor) : "";
    var socket = new WebSocket(scheme + "//" + location.host + root.dataset.ws + query);
    ws.socket = socket;
    socket.addEventListener("open", function () { ws.retries = 0; live("open", "live"); });
    socket.addEventListener("message", function (event) { receive(JSON.parse(event.data)); });
    socket.addEventListener("close", function (event) {
      if (ws.socket !== socket) return;
      ws.socket = null;
      if (event.code === 4401) { live("closed", "signed out"); return; }
      // Back off with jitter, capped at 15 s; resume from the last cursor.
      var delay = Math.min(15000, 500 * Math.pow(2, ws.retries)) * (0.5 + Math.random() / 2);
      ws.retries += 1;
      live("retrying", "reconnecting…");
      setTimeout(connect, delay);
    });
  }

  H.onTime(load);
  load();
  if (root.dataset.ws && window.WebSocket) connect(); // a replayed pod moves with the slider
})();
