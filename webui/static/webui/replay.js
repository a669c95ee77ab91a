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

  // ------------------------------------------------- the board (board.js) at that time
  // board.js appends its own query to data-api, so the time is a path segment there
  // (/api/replay/<id>/at/<time>/pods): moving the slider re-points it and reloads.
  var board = document.getElementById("replay-board");
  function repoint() {
    if (!board || !board.board) return;
    var swap = function (url) { return url.replace(/\/at\/[^/]+\//, "/at/" + encodeURIComponent(iso(at)) + "/"); };
    board.dataset.api = board.board.api = swap(board.board.api);
    board.dataset.summary = board.board.summaryUrl = swap(board.board.summaryUrl);
    board.board.load(true);
  }
  document.addEventListener("handoff:at", repoint);

  // Links to pod pages carry the time, whoever drew them (board.js draws the board's).
  document.addEventListener("click", function (event) {
    var a = event.target.closest && event.target.closest("a[href]");
    if (!a || !board || a.getAttribute("href").indexOf(board.dataset.podBase) !== 0) return;
    a.href = H.withAt(a.getAttribute("href"), iso(at));
  }, true);
})();
