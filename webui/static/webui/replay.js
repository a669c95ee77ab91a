// Replay: the time bar (play/pause, speed, slider) and, on the replay's board page, the
// pods at that time. The chosen time is always in the URL (?at=), so a pasted link opens
// the same picture; pages listen for "handoff:at" and redraw.
(function () {
  "use strict";
  var H = window.HandoffDetail;
  var bar = document.getElementById("replay-bar");
  if (!bar || !H) return;
  var start = new Date(bar.dataset.start).getTime();
  var end = new Date(bar.dataset.end).getTime();
  var slider = bar.querySelector("[data-replay-slider]");
  var output = bar.querySelector("[data-replay-time]");
  var playButton = bar.querySelector("[data-replay-play]");
  var speed = bar.querySelector("[data-replay-speed]");
  var span = Math.max(1, end - start);
  var timer = null;
  var at = clamp(new Date(H.currentAt() || bar.dataset.at || bar.dataset.end).getTime());

  slider.max = String(span);
  slider.step = String(Math.max(1, Math.round(span / 5000)));

  function clamp(t) { return isNaN(t) ? end : Math.min(end, Math.max(start, t)); }

  function iso(t) { return new Date(t).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z"); }

  function show(t) {
    slider.value = String(t - start);
    output.textContent = iso(t);
  }

  // Move to time t: URL, links and every view on the page follow.
  function commit(t) {
    at = clamp(t);
    show(at);
    var url = H.withAt(window.location.pathname + window.location.search, iso(at));
    window.history.replaceState(null, "", url);
    document.querySelectorAll("[data-replay-links] a, #replay-board a[data-pod-link]").forEach(function (a) {
      a.href = H.withAt(a.getAttribute("href"), iso(at));
    });
    document.dispatchEvent(new CustomEvent("handoff:at", { detail: { at: iso(at) } }));
  }

  function play() {
    if (timer) return;
    if (at >= end) at = start;
    playButton.textContent = "Pause";
    playButton.setAttribute("aria-pressed", "true");
    var last = performance.now();
    timer = setInterval(function () {
      var now = performance.now();
      var next = at + (now - last) * Number(speed.value);
      last = now;
      commit(next);
      if (at >= end) pause();
    }, 500);
  }

  function pause() {
    if (timer) clearInterval(timer);
    timer = null;
    playButton.textContent = "Play";
    playButton.setAttribute("aria-pressed", "false");
  }

  slider.addEventListener("input", function () { output.textContent = iso(start + Number(slider.value)); });
  slider.addEventListener("change", function () { pause(); commit(start + Number(slider.value)); });
  playButton.addEventListener("click", function () { if (timer) pause(); else play(); });
  document.addEventListener("keydown", function (event) {
    if (event.key !== " " || event.target.closest("input, select, textarea, button")) return;
    event.preventDefault();
    if (timer) pause(); else play();
  });

  show(at);
  if (!H.currentAt()) window.history.replaceState(null, "", H.withAt(window.location.pathname + window.location.search, iso(at)));
  document.querySelectorAll("[data-replay-links] a").forEach(function (a) { a.href = H.withAt(a.getAttribute("href"), iso(at)); });

  // ------------------------------------------------------------ the board at that time
  var board = document.getElementById("replay-board");
  if (!board || window.HandoffBoard) return;

  function cards(summary) {
    var box = board.querySelector("[data-cards]");
    box.textContent = "";
    H.meta.verdicts.forEach(function (v) {
      var n = summary.verdicts[v.name] || 0;
      if (!n && !v.attention) return;
      var card = H.el("div", null, "verdict-card-count");
      card.style.setProperty("--c", "var(--v-" + v.name + ")");
      card.dataset.verdict = v.name;
      card.appendChild(H.el("strong", n));
      card.appendChild(H.el("span", v.name));
      box.appendChild(card);
    });
  }

  function pods(list) {
    var body = board.querySelector('[data-testid="replay-pods"] tbody');
    body.textContent = "";
    list.pods.forEach(function (p) {
      var a = H.link(H.podUrl(board.dataset.podBase, p.namespace, p.name, p.uid), p.namespace + "/" + p.name);
      a.dataset.podLink = "1";
      var node = H.el("span", p.node || "–", p.node_exists === false ? "node missing" : "");
      var tr = H.row([a, node, p.binding || "–", H.badge(p.verdict), p.reason || "", p.since || ""]);
      tr.dataset.uid = p.uid || "";
      tr.dataset.verdict = p.verdict;
      body.appendChild(tr);
    });
  }

  function load() {
    Promise.all([H.fetchJSON(board.dataset.summary), H.fetchJSON(board.dataset.api + "?limit=200")]).then(function (both) {
      H.status(board, both[0].summary.pods + " pods · " + both[0].summary.nodes + " nodes at " + both[0].evaluated_at +
        (both[1].total > both[1].pods.length ? " · showing the worst " + both[1].pods.length : ""));
      cards(both[0].summary);
      pods(both[1]);
      board.dataset.loaded = both[0].evaluated_at;
    }).catch(function (err) { H.status(board, err.message, true); board.dataset.loaded = "error"; });
  }

  H.onTime(load);
  load();
})();
