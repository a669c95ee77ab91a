// The triage board: a filtered, paged table of pods in triage order (worst first, then
// oldest), kept live over the cluster's websocket. Everything it needs is on its root
// element, so the same module serves a live cluster and a replayed trace:
//   data-api      pods endpoint (GET ?verdict=&namespace=&node=&binding=&q=&cursor=&limit=)
//   data-summary  summary endpoint (counts per verdict under .summary.verdicts)
//   data-ws       websocket path, empty for no live updates
//   data-pod-base pod page prefix: <base><namespace>/<name>/
//   data-initial  id of a JSON script holding the first page (else it is fetched)
//   data-owners   owners endpoint (controllers creating no pods, loops); optional: a
//                 summary with an "owners" key (a replay's) fills them too
// "group by owner" (?group=owner) shows the loaded rows under the workload owning them.
// Text from the cluster only ever goes into the page through textContent.

const SVG = "http://www.w3.org/2000/svg";
const FILTERS = ["verdict", "namespace", "node", "binding", "q"];
const PAGE = 100;
const REFETCH_EVERY = 5000; // ms between refetches of the page while a burst lasts
const HEALTH_PERIOD_MS = 5000; // ms between looks at the streams' health (live boards)

const meta = JSON.parse(document.getElementById("handoff-meta").textContent);
const ranked = [...meta.verdicts].sort((a, b) => b.severity - a.severity);
const RANK = new Map(ranked.map((v, i) => [v.name, i]));
const ATTENTION = ranked.filter((v) => v.attention).map((v) => v.name);
const STAGE_LABEL = new Map(meta.stages.map((s) => [s.name, s.label]));

// ---------------------------------------------------------------- helpers

function el(tag, attrs = {}, text) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null) node.setAttribute(key, value);
  }
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

// RFC 3339 with up to microseconds -> epoch ms (Date.parse wants at most milliseconds).
function ms(text) {
  if (!text) return NaN;
  return Date.parse(String(text).replace(/(\.\d{3})\d+/, "$1"));
}

function span(seconds) {
  if (!Number.isFinite(seconds)) return "—";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
  return `${Math.floor(s / 86400)}d${Math.floor((s % 86400) / 3600)}h`;
}

function cursorKey(cursor) {
  const [a, b] = String(cursor || "0-0").split("-");
  return [Number(a) || 0, Number(b) || 0];
}

function newer(a, b) {
  const [x, y] = [cursorKey(a), cursorKey(b)];
  return x[0] > y[0] || (x[0] === y[0] && x[1] > y[1]);
}

// ------------------------------------------------------------------ board

class Board {
  constructor(root) {
    this.root = root;
    this.api = root.dataset.api;
    this.summaryUrl = root.dataset.summary;
    this.wsPath = root.dataset.ws || "";
    this.podBase = root.dataset.podBase || "";
    this.tbody = root.querySelector("[data-rows]");
    this.more = root.querySelector("[data-more]");
    this.form = root.querySelector("[data-filters]");
    this.rows = new Map(); // uid -> {view, tr}
    this.next = null;
    this.streamCursor = null;
    this.offset = 0; // cluster clock minus this browser's clock, ms
    this.socket = null;
    this.retries = 0;
    this.loading = 0;
    this.summaryTimer = null;
    this.ownersUrl = root.dataset.owners || "";
    this.grouped = new URLSearchParams(location.search).get("group") === "owner";
    this.owners = { failing: [], loops: [] };
    this.filters = this.readFilters();
    this.bind();
    const initial = root.dataset.initial && document.getElementById(root.dataset.initial);
    if (initial) {
      const body = JSON.parse(initial.textContent);
      this.show(body, true);
      if (body.owners) this.showOwners(body.owners); // after show(): its clock says "ago"
    } else {
      this.load(true);
    }
    if (this.wsPath) this.connect();
    else this.setLive("static", "not live");
    setInterval(() => this.tick(), 1000);
    // Stream health changes without any pod changing (a stream failing stops them):
    // ask for it on a period of its own.
    if (root.querySelector("[data-health]")) {
      setInterval(() => this.refreshSummary(0), HEALTH_PERIOD_MS);
    }
  }

  // ------------------------------------------------------------ filters

  readFilters() {
    const params = new URLSearchParams(location.search);
    const out = {};
    for (const key of FILTERS) out[key] = (params.get(key) || "").trim();
    return out;
  }

  verdictSet() {
    const v = this.filters.verdict;
    if (!v) return new Set(ATTENTION);
    if (v === "all") return null;
    return new Set(v.split(","));
  }

  matches(view) {
    const f = this.filters;
    const verdicts = this.verdictSet();
    if (verdicts && !verdicts.has(view.verdict)) return false;
    if (f.namespace && view.namespace !== f.namespace) return false;
    if (f.node && (view.node || "") !== f.node) return false;
    if (f.binding && view.binding !== f.binding) return false;
    if (f.q) {
      const text = `${view.namespace}/${view.name}`.toLowerCase();
      if (!text.includes(f.q.toLowerCase())) return false;
    }
    return true;
  }

  apiUrl(cursor) {
    const params = new URLSearchParams();
    const verdicts = this.verdictSet();
    if (verdicts) params.set("verdict", [...verdicts].join(","));
    for (const key of ["namespace", "node", "binding", "q"]) {
      if (this.filters[key]) params.set(key, this.filters[key]);
    }
    if (cursor) params.set("cursor", cursor);
    params.set("limit", String(PAGE));
    return `${this.api}?${params}`;
  }

  applyFilters(filters, push = true) {
    this.filters = filters;
    const params = new URLSearchParams(location.search);
    for (const key of FILTERS) {
      if (filters[key]) params.set(key, filters[key]);
      else params.delete(key);
    }
    const query = params.toString();
    if (push) history.pushState(null, "", query ? `?${query}` : location.pathname);
    this.syncForm();
    this.load(true);
  }

  syncForm() {
    if (!this.form) return;
    for (const key of FILTERS) {
      const field = this.form.elements.namedItem(key);
      if (field) field.value = this.filters[key];
    }
    for (const card of this.root.querySelectorAll("[data-cards] [data-verdict]")) {
      card.classList.toggle("selected", card.dataset.verdict === this.filters.verdict);
    }
  }

  bind() {
    if (this.form) {
      this.form.addEventListener("submit", (event) => {
        event.preventDefault();
        const data = new FormData(this.form);
        const filters = {};
        for (const key of FILTERS) filters[key] = String(data.get(key) || "").trim();
        this.applyFilters(filters);
      });
      for (const select of this.form.querySelectorAll("select")) {
        select.addEventListener("change", () => this.form.requestSubmit());
      }
      const clear = this.form.querySelector("[data-clear]");
      if (clear) {
        clear.addEventListener("click", (event) => {
          event.preventDefault();
          this.applyFilters(Object.fromEntries(FILTERS.map((k) => [k, ""])));
        });
      }
    }
    for (const card of this.root.querySelectorAll("[data-cards] [data-verdict]")) {
      card.addEventListener("click", (event) => {
        event.preventDefault();
        const verdict = card.dataset.verdict === this.filters.verdict ? "" : card.dataset.verdict;
        this.applyFilters({ ...this.filters, verdict });
      });
    }
    if (this.more) this.more.addEventListener("click", () => this.load(false));
    const group = this.form && this.form.elements.namedItem("group");
    if (group) {
      group.checked = this.grouped;
      group.addEventListener("change", () => {
        this.grouped = group.checked;
        const params = new URLSearchParams(location.search);
        if (this.grouped) params.set("group", "owner");
        else params.delete("group");
        const query = params.toString();
        history.replaceState(null, "", query ? `?${query}` : location.pathname);
        this.regroup();
      });
    }
    window.addEventListener("popstate", () => {
      this.filters = this.readFilters();
      this.syncForm();
      this.load(true);
    });
    document.addEventListener("keydown", (event) => this.key(event));
  }

  // --------------------------------------------------------------- data

  async load(reset) {
    const ticket = ++this.loading;
    let body;
    try {
      const response = await fetch(this.apiUrl(reset ? null : this.next), {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      });
      body = await response.json();
      if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
    } catch (error) {
      if (ticket === this.loading) this.setError(String(error.message || error));
      return;
    }
    if (ticket !== this.loading) return; // a newer load replaced this one
    this.show(body, reset);
    if (reset) this.refreshSummary(0);
  }

  show(body, reset) {
    this.setError(body.error || "");
    const focused = reset ? this.focusedUid() : null;
    if (reset) {
      this.rows.clear();
      this.tbody.replaceChildren();
    }
    this.clock(body.evaluated_at);
    if (body.stream_cursor && (!this.streamCursor || newer(body.stream_cursor, this.streamCursor))) {
      this.streamCursor = body.stream_cursor;
    }
    const fragment = document.createDocumentFragment();
    for (const view of body.pods || []) {
      if (this.rows.has(this.uidOf(view))) continue;
      const entry = { view, tr: this.row(view) };
      this.rows.set(this.uidOf(view), entry);
      fragment.append(entry.tr);
    }
    this.tbody.append(fragment);
    if (focused && this.rows.has(focused)) this.rows.get(focused).tr.focus({ preventScroll: true });
    this.next = body.next || null;
    if (body.summary) this.cards(body.summary.verdicts || {});
    this.footer(body.total);
    this.regroup();
  }

  footer(total) {
    if (this.more) this.more.hidden = !this.next;
    const empty = this.root.querySelector("[data-empty]");
    if (empty) empty.hidden = this.rows.size > 0;
    if (total !== undefined) this.total = total;
    const count = this.root.querySelector("[data-count]");
    if (count) {
      const shown = `${this.rows.size} shown`;
      count.textContent = Number.isInteger(this.total) ? `${this.total} match · ${shown}` : shown;
    }
  }

  setError(text) {
    const box = this.root.querySelector("[data-error]");
    if (!box) return;
    box.textContent = text;
    box.hidden = !text;
  }

  clock(evaluatedAt) {
    const at = ms(evaluatedAt);
    if (Number.isFinite(at)) this.offset = at - Date.now();
  }

  now() {
    return Date.now() + this.offset;
  }

  // The row the keyboard is on, so that redrawing it (a live update, a reload) keeps it there.
  focusedUid() {
    const active = document.activeElement;
    return active instanceof HTMLTableRowElement && active.parentElement === this.tbody ? active.dataset.uid : null;
  }

  uidOf(view) {
    return view.uid || `${view.namespace}/${view.name}`;
  }

  // A burst changed more pods than a message lists: reload what this page shows, at most
  // every few seconds however long the burst lasts, keeping the scroll position.
  refetchSoon() {
    if (this.refetchTimer) return;
    const wait = Math.max(0, REFETCH_EVERY - (Date.now() - (this.refetchedAt || 0)));
    this.refetchTimer = setTimeout(async () => {
      this.refetchTimer = null;
      this.refetchedAt = Date.now();
      const scroll = window.scrollY;
      await this.load(true);
      window.scrollTo(0, scroll);
    }, wait);
  }

  refreshSummary(delay = 1500) {
    if (!this.summaryUrl || this.summaryTimer) return;
    this.summaryTimer = setTimeout(async () => {
      this.summaryTimer = null;
      try {
        const response = await fetch(this.summaryUrl, { credentials: "same-origin" });
        if (!response.ok) return;
        const body = await response.json();
        this.cards(((body.summary || {}).verdicts) || {});
        if (body.streams) this.health(body.streams);
        if (body.owners) this.showOwners(body.owners); // a replay's summary carries them
        if (this.ownersUrl) {
          const owners = await fetch(this.ownersUrl, { credentials: "same-origin" });
          if (owners.ok) this.showOwners(await owners.json());
        }
      } catch (error) {
        // The next update asks again.
      }
    }, delay);
  }

  // ------------------------------------------------------------- owners

  // Controllers creating no pods (one row each, the controller's own message) and loops
  // (one banner per owner whose pods keep ending the same way), above the pods.
  showOwners(body) {
    // Live answers hold only what needs attention; a replay's (triage's) hold all.
    const failing = (body.failing || []).filter((f) => !f.resolved);
    this.owners = { failing, loops: (body.loops || []).filter((loop) => loop.active !== false) };
    const section = this.root.querySelector("[data-owner-list]");
    if (!section) return;
    const loops = section.querySelector("[data-loops]");
    loops.replaceChildren(...this.owners.loops.map((loop) => this.loopItem(loop)));
    const table = section.querySelector("[data-failing-owners]");
    table.tBodies[0].replaceChildren(...this.owners.failing.map((f) => this.failureRow(f)));
    table.hidden = !this.owners.failing.length;
    section.hidden = !this.owners.failing.length && !this.owners.loops.length;
    this.regroup();
  }

  ownerLabel(owner, workload) {
    const label = `${owner.kind} ${owner.namespace}/${owner.name}`;
    return workload ? `${label} (${workload.kind} ${workload.name})` : label;
  }

  loopItem(loop) {
    const li = el("li", { class: "loop", "data-testid": "loop", "data-key": loop.key });
    li.style.setProperty("--c", `var(--v-${loop.verdict})`);
    li.append(
      el("strong", {}, "Loop "),
      el("span", { class: "owner-name" }, this.ownerLabel(loop.owner)),
      el("span", {}, `: ${loop.summary}`),
      el("span", { class: "muted", "data-last": loop.last }, this.ago(loop.last, " · last ")),
      el("span", { class: "muted" }, ` · latest: ${loop.pods.join(", ")}`),
    );
    return li;
  }

  failureRow(f) {
    const tr = el("tr", { "data-testid": "failing-owner", "data-key": f.key });
    const why = el("td");
    why.append(el("span", { class: "pill" }, f.cause), el("span", { class: "reason" }, f.reason));
    const message = el("td", { class: "message", title: f.explanation }, f.message);
    const last = el("td");
    last.append(el("span", { "data-last": f.last }, this.ago(f.last)));
    if (f.stale) last.append(el("span", { class: "tag", title: f.explanation }, "stale"));
    tr.append(el("td", { class: "owner-name" }, this.ownerLabel(f.owner, f.workload)), why, message, el("td", {}, f.count), last);
    return tr;
  }

  // ------------------------------------------------------------ grouping

  groupOf(view) {
    const owner = view.owner;
    if (!owner) return { key: "", label: "no owner" };
    const shown = owner.workload || owner;
    return { key: `${shown.kind}/${view.namespace}/${shown.name}`, label: `${shown.kind} ${view.namespace}/${shown.name}` };
  }

  // Grouped, the loaded rows stand under a header per owner, owners in the order of their
  // worst row; ungrouped, the headers go and the rows keep their triage order.
  regroup() {
    const headers = this.tbody.querySelectorAll("tr.group");
    if (!this.grouped && !headers.length) return; // ungrouped rows are kept in order as they come
    for (const header of headers) header.remove();
    const focused = this.focusedUid();
    if (!this.grouped) {
      this.tbody.append(...[...this.rows.values()].map((entry) => entry.tr));
      this.refocus(focused);
      return;
    }
    const groups = new Map();
    for (const entry of this.rows.values()) {
      const { key, label } = this.groupOf(entry.view);
      if (!groups.has(key)) groups.set(key, { label, entries: [] });
      groups.get(key).entries.push(entry);
    }
    const loops = new Set(this.owners.loops.map((loop) => loop.key));
    // A ReplicaSet's failure tags its Deployment's group, where its pods are.
    const failing = new Set(this.owners.failing.flatMap((f) => (f.workload ? [f.key, `${f.workload.kind}/${f.owner.namespace}/${f.workload.name}`] : [f.key])));
    const out = [];
    for (const [key, group] of groups) {
      const worst = group.entries[0].view.verdict;
      const header = el("tr", { class: "group", "data-group": key, "data-testid": "group" });
      header.style.setProperty("--c", `var(--v-${worst})`);
      const cell = el("th", { colspan: "6", scope: "rowgroup" });
      cell.append(el("span", { class: "owner-name" }, group.label), el("span", { class: "muted" }, ` · ${group.entries.length} shown · worst ${worst}`));
      if (loops.has(key)) cell.append(el("span", { class: "tag" }, "loop"));
      if (failing.has(key)) cell.append(el("span", { class: "tag" }, "creating no pods"));
      header.append(cell);
      out.push(header, ...group.entries.map((entry) => entry.tr));
    }
    this.tbody.append(...out);
    this.refocus(focused);
  }

  // Moving a row out of the table and back blurs it: give the keyboard its row back.
  refocus(uid) {
    const entry = uid && this.rows.get(uid);
    if (entry && document.activeElement !== entry.tr) entry.tr.focus({ preventScroll: true });
  }

  health(streams) {
    // The same words and lines as /healthz and `manage.py status` (handoff/live/health.py).
    const badge = this.root.querySelector("[data-health]");
    if (badge) {
      badge.textContent = `streams ${streams.state}`;
      badge.className = `health health-${streams.state}`;
    }
    const list = this.root.querySelector("[data-failing]");
    if (list) {
      list.replaceChildren(...(streams.failing || []).map((line) => el("li", {}, line)));
      list.hidden = !(streams.failing || []).length;
    }
  }

  cards(counts) {
    // With only a verdict filter, the counts give the number of matches too.
    const f = this.filters;
    if (!f.namespace && !f.node && !f.binding && !f.q) {
      const verdicts = this.verdictSet();
      const names = Object.keys(counts).filter((name) => !verdicts || verdicts.has(name));
      if (names.length) this.total = names.reduce((sum, name) => sum + Number(counts[name] || 0), 0);
    } else if (this.socket) {
      this.total = undefined; // live changes made the page's count stale
    }
    this.footer();
    for (const card of this.root.querySelectorAll("[data-cards] [data-verdict]")) {
      const n = card.querySelector("[data-n]");
      if (n && card.dataset.verdict in counts) n.textContent = String(counts[card.dataset.verdict]);
    }
  }

  // ---------------------------------------------------------- live rows

  sortKey(view) {
    const created = ms(view.milestones && view.milestones.created);
    return [RANK.has(view.verdict) ? RANK.get(view.verdict) : 99, Number.isFinite(created) ? created : Infinity, this.uidOf(view)];
  }

  before(a, b) {
    const [x, y] = [this.sortKey(a), this.sortKey(b)];
    for (let i = 0; i < 3; i++) {
      if (x[i] < y[i]) return true;
      if (x[i] > y[i]) return false;
    }
    return false;
  }

  apply(pods, removed) {
    for (const uid of removed || []) this.drop(uid);
    for (const view of pods || []) this.upsert(view);
    this.footer();
    this.regroup();
  }

  upsert(view) {
    const uid = this.uidOf(view);
    const entry = this.rows.get(uid);
    if (!this.matches(view)) {
      if (entry) this.leave(uid, entry, view);
      return;
    }
    const changed = entry && entry.view.verdict !== view.verdict;
    const focused = entry && entry.tr === document.activeElement;
    if (entry) {
      entry.tr.remove();
      this.rows.delete(uid);
    } else if (this.next && this.rows.size) {
      // Beyond the loaded pages: it will come with "Load more".
      const last = [...this.rows.values()].pop();
      if (last && this.before(last.view, view)) return;
    }
    const tr = this.row(view);
    this.place(tr, view);
    this.rows.set(uid, { view, tr });
    if (focused) tr.focus({ preventScroll: true });
    if (!entry || changed) this.flash(tr);
  }

  place(tr, view) {
    // Rows are kept in triage order; find the first row that sorts after this view.
    const rows = [...this.rows.values()];
    let lo = 0;
    let hi = rows.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.before(rows[mid].view, view)) lo = mid + 1;
      else hi = mid;
    }
    const after = rows[lo];
    this.tbody.insertBefore(tr, after ? after.tr : null);
    // Map order must follow the table's.
    const ordered = new Map();
    for (const r of rows.slice(0, lo)) ordered.set(this.uidOf(r.view), r);
    ordered.set(this.uidOf(view), null);
    for (const r of rows.slice(lo)) ordered.set(this.uidOf(r.view), r);
    this.rows = ordered;
  }

  leave(uid, entry, view) {
    // No longer matches the filters: say so for a moment rather than vanish under the eye.
    const tr = this.row(view);
    tr.classList.add("leaving");
    const focused = entry.tr === document.activeElement;
    entry.tr.replaceWith(tr);
    if (focused) tr.focus({ preventScroll: true });
    entry.tr = tr;
    entry.view = view;
    this.flash(tr);
    setTimeout(() => {
      if (this.rows.get(uid) === entry) this.drop(uid);
    }, 4000);
  }

  drop(uid) {
    const entry = this.rows.get(uid);
    if (!entry) return;
    if (entry.tr === document.activeElement) {
      // The keyboard moves to the row that takes its place rather than back to the top.
      const neighbour = entry.tr.nextElementSibling || entry.tr.previousElementSibling;
      if (neighbour) neighbour.focus({ preventScroll: true });
    }
    entry.tr.remove();
    this.rows.delete(uid);
    this.footer();
    this.regroup();
  }

  flash(tr) {
    tr.classList.remove("flash");
    void tr.offsetWidth; // restart the animation
    tr.classList.add("flash");
  }

  // -------------------------------------------------------------- render

  row(view) {
    const tr = el("tr", { "data-uid": this.uidOf(view), "data-verdict": view.verdict, tabindex: "-1" });
    tr.style.setProperty("--c", `var(--v-${view.verdict})`);

    const pod = el("td", { class: "pod" });
    const href = `${this.podBase}${encodeURIComponent(view.namespace)}/${encodeURIComponent(view.name)}/`;
    pod.append(el("span", { class: "ns" }, `${view.namespace}/`), el("a", { href, "data-open": "" }, view.name));
    tr.append(pod);

    const node = el("td", { class: "node" });
    if (view.node) {
      node.append(el("span", {}, view.node));
      if (view.node_exists === false) {
        node.classList.add("missing");
        node.append(el("span", { class: "tag missing-tag", title: "No Node object has this name" }, "no such node"));
      }
    } else {
      node.append(el("span", { class: "muted" }, "unbound"));
    }
    tr.append(node);

    const binding = el("td");
    if (view.binding) binding.append(el("span", { class: `badge binding-${view.binding}` }, view.binding));
    tr.append(binding);

    const verdict = el("td", { class: "verdict" });
    verdict.append(el("span", { class: "pill", title: (ranked.find((v) => v.name === view.verdict) || {}).summary }, view.verdict));
    if (view.reason) verdict.append(el("span", { class: "reason" }, view.reason));
    if (view.podgc && view.verdict !== "podgc-deleted" && !(view.milestones && view.milestones.deleted)) {
      verdict.append(el("span", { class: "countdown", "data-podgc-earliest": view.podgc.earliest, "data-podgc-latest": view.podgc.latest, "data-testid": "countdown" }));
    }
    tr.append(verdict);

    const stage = el("td", { class: "in-stage" });
    const stages = view.stages || [];
    const current = stages[stages.length - 1];
    if (current) {
      stage.append(el("span", { class: "stage-name" }, STAGE_LABEL.get(current.name) || current.name));
      const time = el("span", { class: "stage-time" });
      if (current.open) time.dataset.since = current.start;
      else time.textContent = span((ms(current.end) - ms(current.start)) / 1000);
      stage.append(time);
    }
    tr.append(stage);

    const timeline = el("td", { class: "timeline" });
    timeline.append(this.mini(stages));
    tr.append(timeline);
    this.tickRow(tr);
    return tr;
  }

  mini(stages) {
    const width = 160;
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", `0 0 ${width} 10`);
    svg.setAttribute("width", String(width));
    svg.setAttribute("height", "10");
    svg.setAttribute("role", "img");
    if (!stages.length) return svg;
    const start = ms(stages[0].start);
    const end = Math.max(...stages.map((s) => ms(s.end)), start + 1);
    const label = [];
    for (const s of stages) {
      const a = ms(s.start);
      const b = Math.max(ms(s.end), a);
      const rect = document.createElementNS(SVG, "rect");
      rect.setAttribute("x", (((a - start) / (end - start)) * width).toFixed(1));
      rect.setAttribute("width", Math.max(1.5, ((b - a) / (end - start)) * width).toFixed(1));
      rect.setAttribute("y", "1");
      rect.setAttribute("height", "8");
      rect.setAttribute("fill", `var(--s-${s.name})`);
      const title = document.createElementNS(SVG, "title");
      const text = `${STAGE_LABEL.get(s.name) || s.name}: ${span((b - a) / 1000)}`;
      title.textContent = text;
      rect.append(title);
      svg.append(rect);
      label.push(text);
    }
    svg.setAttribute("aria-label", label.join(", "));
    return svg;
  }

  tick() {
    for (const tr of this.tbody.children) this.tickRow(tr);
    for (const last of this.root.querySelectorAll("[data-owner-list] [data-last]")) {
      last.textContent = this.ago(last.dataset.last, last.closest("[data-loops]") ? " · last " : "");
    }
  }

  ago(at, prefix = "") {
    return `${prefix}${span((this.now() - ms(at)) / 1000)} ago`;
  }

  tickRow(tr) {
    const now = this.now();
    const since = tr.querySelector("[data-since]");
    if (since) since.textContent = span((now - ms(since.dataset.since)) / 1000);
    const countdown = tr.querySelector("[data-podgc-earliest]");
    if (countdown) {
      const a = (ms(countdown.dataset.podgcEarliest) - now) / 1000;
      const b = (ms(countdown.dataset.podgcLatest) - now) / 1000;
      countdown.textContent =
        b <= 0 ? "PodGC overdue" : a > 0 ? `PodGC in ${span(a)}–${span(b)}` : `PodGC within ${span(b)}`;
    }
  }

  // ----------------------------------------------------------- websocket

  setLive(state, text) {
    const live = this.root.querySelector("[data-live]");
    this.root.dataset.live = state;
    if (live) {
      live.textContent = text;
      live.dataset.state = state;
    }
  }

  connect() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const query = this.streamCursor ? `?cursor=${encodeURIComponent(this.streamCursor)}` : "";
    const socket = new WebSocket(`${scheme}//${location.host}${this.wsPath}${query}`);
    this.socket = socket;
    socket.addEventListener("open", () => {
      this.retries = 0;
      this.setLive("open", "live");
    });
    socket.addEventListener("message", (event) => this.receive(JSON.parse(event.data)));
    socket.addEventListener("close", (event) => {
      if (this.socket !== socket) return;
      this.socket = null;
      if (event.code === 4401) {
        this.setLive("closed", "signed out");
        return;
      }
      // Exponential backoff with jitter, capped at 15 s; resume from the last cursor.
      const delay = Math.min(15000, 500 * 2 ** this.retries) * (0.5 + Math.random() / 2);
      this.retries += 1;
      this.setLive("retrying", "reconnecting…");
      setTimeout(() => this.connect(), delay);
    });
  }

  receive(message) {
    const data = message.data || {};
    if (message.type === "hello") {
      if (!this.streamCursor) this.streamCursor = data.cursor;
      this.clock(data.evaluated_at);
      if (data.summary) this.cards(data.summary.verdicts || {});
    } else if (message.type === "cluster.update" || message.type === "resume") {
      this.clock(data.evaluated_at);
      if (data.refresh) this.refetchSoon();
      else this.apply(data.pods, data.removed);
      if (!data.more && data.cursor && (!this.streamCursor || !newer(this.streamCursor, data.cursor))) {
        this.streamCursor = data.cursor;
      }
      this.root.dataset.cursor = this.streamCursor || "";
      if (data.counts) this.cards(data.counts);
      else this.refreshSummary();
    } else if (message.type === "reload") {
      this.streamCursor = data.cursor;
      this.load(true);
    }
  }

  // ------------------------------------------------------------ keyboard

  key(event) {
    const target = event.target;
    const typing = target instanceof HTMLElement && target.closest("input, select, textarea");
    if (event.key === "Escape" && typing) {
      target.blur();
      return;
    }
    if (typing || event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key === "/") {
      event.preventDefault();
      const q = this.form && this.form.elements.namedItem("q");
      if (q) q.focus();
    } else if (event.key === "j" || event.key === "k") {
      event.preventDefault();
      const rows = [...this.tbody.querySelectorAll("tr[data-uid]")];
      if (!rows.length) return;
      const at = rows.indexOf(document.activeElement);
      const next = event.key === "j" ? Math.min(rows.length - 1, at + 1) : Math.max(0, at < 0 ? 0 : at - 1);
      rows[next].focus();
      rows[next].scrollIntoView({ block: "nearest" });
    } else if (event.key === "Enter" && target instanceof HTMLTableRowElement) {
      const link = target.querySelector("[data-open]");
      if (link) link.click();
    }
  }
}

for (const root of document.querySelectorAll("[data-board]")) {
  root.board = new Board(root);
}
