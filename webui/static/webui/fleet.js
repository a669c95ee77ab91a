// The fleet page: duration distributions with percentile and SLO lines, per-node heatmaps,
// and a WebGL swimlane of up to 10,000 pods. Every aggregate is computed by the server.
(function () {
  "use strict";
  var H = window.HandoffDetail;
  var root = document.getElementById("fleet-root");
  if (!root || !H) return;
  var LABELS = {
    create_to_bind: "create → bind (scheduler)",
    bind_to_ack: "bind → kubelet ack (the handoff)",
    ack_to_running: "kubelet ack → running",
    create_to_running: "create → running (pod startup)",
  };

  function percentiles(data) {
    var body = root.querySelector('[data-testid="percentiles"] tbody');
    body.textContent = "";
    Object.keys(data.durations).forEach(function (name) {
      var d = data.durations[name];
      var tr = H.row([LABELS[name] || name, d.count, d.not_observed || 0, H.seconds(d.p50), H.seconds(d.p90), H.seconds(d.p99), H.seconds(d.max)]);
      tr.dataset.percentiles = name;
      if (name === "create_to_running" && d.p99 !== null && d.p99 > data.slo_seconds) tr.className = "warning";
      body.appendChild(tr);
    });
  }

  function vline(x, colour, label, dash) {
    return {
      x: x, label: label, colour: colour,
      shape: { type: "line", xref: "x", yref: "paper", x0: x, x1: x, y0: 0, y1: 1, line: { color: colour, width: 1.5, dash: dash || "dot" } },
    };
  }

  // Percentile and SLO labels sit just inside the top of the plot, beside their line (to
  // its left near the right edge). Labels that would touch move down a row, so close
  // percentiles (p50 = p90 = p99 for a handful of pods) stay readable.
  var LABEL_PX_PER_CHAR = 6.5, LABEL_ROW_PX = 14, GAP_PX = 4;
  function labels(marks, range, plotWidth) {
    var perUnit = plotWidth / (range[1] - range[0]);
    var placed = marks.map(function (m) {
      var at = (Math.log10(m.x) - range[0]) * perUnit, width = m.label.length * LABEL_PX_PER_CHAR + 4;
      var right = at + 3 + width <= plotWidth;
      return { m: m, right: right, left: right ? at + 3 : at - 3 - width, end: right ? at + 3 + width : at - 3 };
    }).sort(function (a, b) { return a.left - b.left; });
    var rows = [];
    placed.forEach(function (p) {
      var row = 0;
      while (rows[row] !== undefined && rows[row] + GAP_PX > p.left) row++;
      rows[row] = p.end;
      p.row = row;
    });
    return placed.map(function (p) {
      return { x: Math.log10(p.m.x), xref: "x", yref: "paper", y: 1, yanchor: "top", xanchor: p.right ? "left" : "right",
        xshift: p.right ? 3 : -3, yshift: -2 - p.row * LABEL_ROW_PX, text: H.esc(p.m.label), showarrow: false,
        font: { size: 10, color: p.m.colour } };
    });
  }

  // Decades only on the log axis (1 ms, 10 ms, 0.1 s …): the minor labels ran into each other.
  function decades(range, plotWidth) {
    var span = range[1] - range[0];
    return span * 48 > plotWidth ? Math.ceil(span * 48 / plotWidth) : 1;
  }

  function distributions(data) {
    var box = root.querySelector("[data-distributions]");
    box.textContent = "";
    var names = Object.keys(data.durations);
    // Every figure first, then the charts: drawn into a grid still filling up, a chart
    // would take the whole row and spill over its neighbours once they arrive.
    var divs = names.map(function (name) {
      var figure = H.el("figure", null, "chart-figure");
      // The title is the page's, above the chart: Plotly's modebar can never cover it.
      figure.appendChild(H.el("h3", LABELS[name] || name, "chart-title"));
      var div = H.el("div", null, "chart");
      div.dataset.duration = name;
      figure.appendChild(div);
      box.appendChild(figure);
      return div;
    });
    names.forEach(function (name, index) {
      var d = data.durations[name], div = divs[index];
      if (!d.count) { div.appendChild(H.el("p", (LABELS[name] || name) + ": no pod has both milestones yet.", "muted")); return; }
      // A log axis cannot show 0 (a coarse one-second timestamp gives it): such values
      // are drawn at the first bin's edge, which the histogram already counts them in.
      var edges = d.histogram.edges, floor = edges[0], centres = [], widths = [];
      var at = function (x) { return Math.max(x, floor); };
      for (var i = 0; i < d.histogram.counts.length; i++) { centres.push(Math.sqrt(edges[i] * edges[i + 1])); widths.push(edges[i + 1] - edges[i]); }
      var traces = [
        { type: "bar", name: "pods", x: centres, y: d.histogram.counts, width: widths, marker: { color: "#64b5f6" },
          hovertemplate: "%{x:.3g} s: %{y} pods<extra></extra>" },
        { type: "scatter", mode: "lines", name: "ECDF", x: d.ecdf.x.map(at), y: d.ecdf.y, yaxis: "y2", line: { color: "#1e88e5", shape: "hv" },
          hovertemplate: "%{y:.1%} ≤ %{x:.3g} s<extra></extra>" },
      ];
      var marks = [vline(at(d.p50), "#2ca02c", "p50"), vline(at(d.p90), "#f0a30a", "p90"), vline(at(d.p99), "#d62728", "p99")];
      if (name === "create_to_running") marks.push(vline(data.slo_seconds, "#8c1c8c", "5 s SLO", "dash"));
      // The SLO line stays in view even when every pod is far from it.
      var slo = name === "create_to_running" ? data.slo_seconds : null;
      var range = [Math.log10(slo ? Math.min(floor, slo / 2) : floor), Math.log10(slo ? Math.max(edges[edges.length - 1], slo * 2) : edges[edges.length - 1])];
      if (range[1] - range[0] < 1) range = [range[0] - 0.5, range[1] + 0.5];
      var margin = { l: 50, r: 45, t: 28, b: 40 };
      var plotWidth = Math.max(120, (div.clientWidth || 600) - margin.l - margin.r);
      var layout = H.plotLayout({
        height: 240, showlegend: false, bargap: 0,
        xaxis: { type: "log", title: { text: "seconds" }, range: range, dtick: decades(range, plotWidth) },
        yaxis: { title: { text: "pods" } },
        yaxis2: { overlaying: "y", side: "right", range: [0, 1], tickformat: ".0%", showgrid: false },
        shapes: marks.map(function (m) { return m.shape; }),
        annotations: labels(marks, range, plotWidth),
        margin: margin,
      });
      window.Plotly.react(div, traces, layout, H.plotConfig);
    });
  }

  function heatmaps(data) {
    var h = data.heatmap;
    var names = h.nodes.map(H.esc);
    var failText = h.nodes.map(function (node, i) {
      return h.failures.map(function (f, j) { return H.esc(node) + "<br>" + H.esc(f) + ": " + h.counts[i][j] + " of " + h.pods[i] + " pods"; });
    });
    window.Plotly.react("fleet-heat-failures", [{
      type: "heatmap", x: h.failures, y: names, z: h.counts, text: failText, hoverinfo: "text",
      colorscale: [[0, "rgba(214,39,40,0.04)"], [1, H.verdicts.stuck.colour]], xgap: 1, ygap: 1,
      zmin: 0, zmax: Math.max(1, Math.max.apply(null, [0].concat.apply([0], h.counts))),
    }], H.plotLayout({ height: Math.max(260, 22 * h.nodes.length + 120),
      yaxis: { automargin: true, autorange: "reversed", type: "category" }, margin: { l: 120, r: 20, t: 90, b: 20 }, xaxis: { type: "category", side: "top", tickangle: -30 } }), H.plotConfig);
    var latText = h.nodes.map(function (node, i) {
      return h.latency.map(function (name, j) { return H.esc(node) + "<br>" + H.esc(name) + " p90: " + H.esc(H.seconds(h.p90[i][j])); });
    });
    window.Plotly.react("fleet-heat-latency", [{
      type: "heatmap", x: h.latency, y: names, z: h.p90, text: latText, hoverinfo: "text", colorscale: "YlOrRd", reversescale: true, zmin: 0, xgap: 1, ygap: 1,
      colorbar: { title: { text: "p90 s" } },
    }], H.plotLayout({ height: Math.max(260, 22 * h.nodes.length + 120),
      yaxis: { automargin: true, autorange: "reversed", type: "category" }, margin: { l: 120, r: 20, t: 90, b: 20 }, xaxis: { type: "category", side: "top", tickangle: -30 } }), H.plotConfig);
  }

  function swimlane(data) {
    var s = data.swimlane, lanes = s.lanes, base = s.base_ms;
    var note = root.querySelector("[data-swim-note]");
    note.textContent = lanes.length + " pods, most recently created" + (s.left_out ? " (" + s.left_out + " older pods not drawn)" : "") + " · WebGL";
    var width = Math.max(1, Math.min(8, 500 / Math.max(1, lanes.length)));
    var laneText = lanes.map(function (l) { return H.esc(l[0] + "/" + l[1]); });
    // Each lane's row: per bar its stage's place in s.stages, its start (the first from
    // base_ms, the others from the end of the bar before) and its length, in ms.
    var byStage = {}, ends = {};
    s.bars.forEach(function (row, lane) {
      var previous = 0;
      for (var j = 0; j + 2 < row.length; j += 3) {
        var start = previous + row[j + 1], end = start + row[j + 2];
        (byStage[s.stages[row[j]]] = byStage[s.stages[row[j]]] || []).push(lane, start, end);
        ends[lane] = Math.max(ends[lane] || 0, end);
        previous = end;
      }
    });
    var traces = [];
    H.meta.stages.forEach(function (stage) {
      var bars = byStage[stage.name];
      if (!bars) return;
      var x = [], y = [], text = [];
      for (var k = 0; k < bars.length; k += 3) {
        var lane = bars[k], start = bars[k + 1], end = bars[k + 2];
        var t = laneText[lane] + "<br>" + H.esc(stage.label) + ": " + H.esc(H.seconds((end - start) / 1000));
        x.push(base + start, base + end, null); y.push(lane, lane, null); text.push(t, t, "");
      }
      traces.push({ type: "scattergl", mode: "lines", name: stage.label, x: x, y: y, text: text, hoverinfo: "text",
        line: { color: stage.colour, width: width }, connectgaps: false });
    });
    var byVerdict = {};
    lanes.forEach(function (l, i) {
      if (ends[i] === undefined) return;
      (byVerdict[l[3]] = byVerdict[l[3]] || []).push(i);
    });
    Object.keys(byVerdict).forEach(function (verdict) {
      var idx = byVerdict[verdict];
      traces.push({ type: "scattergl", mode: "markers", name: "verdict: " + verdict, x: idx.map(function (i) { return base + ends[i]; }), y: idx,
        customdata: idx, text: idx.map(function (i) { return laneText[i] + "<br>" + H.esc(verdict); }), hoverinfo: "text",
        marker: { color: H.verdicts[verdict] ? H.verdicts[verdict].colour : "#999", size: Math.max(3, width + 2) } });
    });
    var yaxis = { title: { text: "pods" }, autorange: "reversed", showticklabels: lanes.length <= 40, zeroline: false };
    if (lanes.length <= 40) { yaxis.tickvals = lanes.map(function (_, i) { return i; }); yaxis.ticktext = laneText; yaxis.automargin = true; }
    var div = document.getElementById("fleet-swimlane");
    window.Plotly.react(div, traces, H.plotLayout({ height: 560, xaxis: { type: "date", title: { text: "time (UTC)" } }, yaxis: yaxis,
      legend: { orientation: "h", y: -0.15 }, hovermode: "closest" }), H.plotConfig).then(function () {
      div.dataset.lanes = String(lanes.length);
      if (div.dataset.clicks) return;
      div.dataset.clicks = "1";
      div.on("plotly_click", function (event) {
        var point = event.points && event.points[0];
        if (!point || point.y === null || point.y === undefined) return;
        var lane = lanes[Math.round(point.y)];
        if (lane) window.location.href = H.podUrl(root.dataset.podBase, lane[0], lane[1], lane[2]);
      });
    });
  }

  function load() {
    H.fetchJSON(root.dataset.api).then(function (data) {
      H.status(root, data.pods + " pods as of " + (data.evaluated_at || "now"));
      percentiles(data);
      distributions(data);
      heatmaps(data);
      swimlane(data);
      root.dataset.loaded = String(data.pods);
    }).catch(function (err) { H.status(root, err.message, true); root.dataset.loaded = "error"; });
  }

  H.onTime(load);
  load();
})();
