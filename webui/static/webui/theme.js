// Light/dark theme: follows the system unless the user picked one (kept in localStorage).
(function () {
  var key = "handoff-theme";
  var root = document.documentElement;
  var saved = localStorage.getItem(key);
  if (saved === "light" || saved === "dark") root.dataset.theme = saved;

  document.addEventListener("click", function (event) {
    if (!event.target.closest("[data-theme-toggle]")) return;
    var dark = root.dataset.theme
      ? root.dataset.theme === "dark"
      : window.matchMedia("(prefers-color-scheme: dark)").matches;
    root.dataset.theme = dark ? "light" : "dark";
    localStorage.setItem(key, root.dataset.theme);
  });
})();
