"""Every page at scale (issue 19): 50 people at once on a store of 150,000 pods while ingest
runs.

The store is the scale trace folded by the real fold (``ingest``). While a feeder hands
2,000 pods a second to a second cluster's stream, folded by a real fold task in a Celery
worker, 50 HTTP clients load the board, pod, fleet and nodes pages, search and the JSON API
through the web as the product serves it (``manage.py serve``: several Daphne processes)
as a signed-in user, and websocket subscribers on the fed cluster's board note when each fed
pod reaches them. A page is what a browser waits for before it can draw: the HTML, then the
JSON its script fetches (pod, fleet, nodes), timed as one sample.

Two client models, one after the other while ingest runs: the closed loop (each client asks
for the next page the moment the last one arrived: 50 requests always in flight, a
saturation test, its p99 is mostly queueing) and 50 people (each reads a page for a random
1 to 5 s before the next one, as Locust's ``between(1, 5)``). The ≤ 300 ms target is judged on
the people: that is what "50 users at once" describes (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import multiprocessing
import os
import random
import statistics
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
import redis

from devtools.bench.copies import CopyWatch, Span, copies_note, copies_summary, overlapping
from devtools.bench.latency import (
    LATENCY_CLUSTER,
    Feeder,
    _Arrivals,
    _listener,
    _websocket_client,
    caught_up,
    fold_lag,
)
from devtools.bench.results import Figure, Results
from devtools.bench.services import Services
from devtools.devstack import group_members, start_time
from handoff.core import viewcodec
from handoff.core.trace import format_time
from handoff.live import clusters, store

CLUSTER = "bench"  # where bench.ingest folded the trace
PAGES = ("board", "pod", "fleet", "nodes", "search", "api_pods")
P99_TARGET_MS = 300.0
CLIENTS = 50
WS_SUBSCRIBERS = 10
INGEST_RATE = 2000
THINK_S = (1.0, 5.0)  # a person reads a page this long (uniform) before the next one


def sample_pods(client: redis.Redis, cluster: str, count: int, seed: int = 1) -> list[tuple]:
    """``count`` (namespace, name) pairs of stored pods, spread over the whole store."""
    names: list[tuple[str, str]] = []
    cursor = 0
    while True:
        cursor, chunk = client.hscan(store.pods_key(cluster), cursor, count=2000)
        for raw in chunk.values():
            view = viewcodec.decode_view(raw)
            names.append((view["namespace"], view["name"]))
        if cursor == 0 or len(names) >= 20 * count:
            break
    return random.Random(seed).sample(names, min(count, len(names)))


def search_terms(pods: list[tuple[str, str]], seed: int = 1) -> list[str]:
    """What people type: name prefixes, name fragments, namespaces, and no match."""
    rng = random.Random(seed)
    terms = []
    for namespace, name in pods:
        cut = rng.randint(3, max(3, len(name)))
        start = rng.randint(0, max(0, len(name) - 4))
        terms += [name[:cut], name[start : start + 4], namespace, f"{namespace}/{name[:5]}"]
    terms.append("no-such-pod-anywhere")
    return terms


def page_requests(pods: list[tuple[str, str]], terms: list[str]) -> dict[str, list[list[str]]]:
    """Per page, the request paths one sample fetches (in order), for every target."""
    c = CLUSTER
    api = f"/api/clusters/{c}"

    def pod(ns: str, name: str) -> list[str]:
        ns, name = quote(ns, safe=""), quote(name, safe="")
        return [f"/clusters/{c}/pods/{ns}/{name}/", f"{api}/pods/{ns}/{name}"]

    return {
        "board": [[f"/clusters/{c}/"]],
        "pod": [pod(ns, name) for ns, name in pods],
        "fleet": [[f"/clusters/{c}/fleet/", f"{api}/fleet"]],
        "nodes": [[f"/clusters/{c}/nodes/", f"{api}/nodes"]],
        "search": [[f"{api}/pods?q={quote(term, safe='')}"] for term in terms],
        "api_pods": [[f"{api}/pods?attention=1"], [f"{api}/pods?verdict=stuck"], [f"{api}/pods"]],
    }


async def _client(
    session: Any, site: str, requests: dict[str, list[list[str]]], rng: random.Random,
    until: float, out: dict[str, dict[str, Any]], think: tuple[float, float] | None,
) -> None:  # fmt: skip
    """One client: page after page, each chosen at random, until ``until``; with ``think``
    a person, who arrives within the first think time and reads each page before the next."""
    import aiohttp

    if think:
        await asyncio.sleep(rng.uniform(0, think[1]))
    while time.monotonic() < until:
        page = rng.choice(PAGES)
        paths = rng.choice(requests[page])
        began, started = time.time(), time.perf_counter()
        server: dict[str, float] = {}
        wire = 0
        try:
            for path in paths:
                async with session.get(site + path) as answer:
                    body = await answer.read()
                    # As sent (gzip when the page's answer is kept so), else as read.
                    wire += answer.content_length or len(body)
                    if answer.status != 200:
                        raise RuntimeError(f"HTTP {answer.status} for {path}")
                    for name, ms in server_timing(answer.headers.get("Server-Timing")).items():
                        server[name] = server.get(name, 0.0) + ms
        except (aiohttp.ClientError, RuntimeError, TimeoutError) as error:
            out[page]["errors"] += 1
            out[page]["last_error"] = f"{type(error).__name__}: {error}"[:200]
        else:
            out[page]["ms"].append((time.perf_counter() - started) * 1000)
            out[page]["at"].append(began)
            out[page]["bytes"].append(wire)
            for name in SERVER_PARTS:
                out[page][name].append(server.get(name))
        if think:
            await asyncio.sleep(rng.uniform(*think))


async def _load(
    site: str, cookie: str, requests: dict[str, list[list[str]]], clients: int, seconds: float,
    think: tuple[float, float] | None,
) -> dict[str, Any]:  # fmt: skip
    import aiohttp

    out: dict[str, dict[str, Any]] = {
        page: {"ms": [], "at": [], "bytes": [], "errors": 0, **{name: [] for name in SERVER_PARTS}}
        for page in PAGES
    }
    headers = {"Cookie": f"sessionid={cookie}", "Accept": "text/html,application/json"}
    timeout = aiohttp.ClientTimeout(total=30)
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(
        headers=headers, timeout=timeout, connector=connector
    ) as session:
        until = time.monotonic() + seconds
        lags: list[float] = []
        lag = asyncio.ensure_future(loop_lag(until, lags))
        await asyncio.gather(
            *(
                _client(session, site, requests, random.Random(n), until, out, think)
                for n in range(clients)
            )
        )
        await lag
    return {"pages": out, "loop_lag_ms": lags, "cpu_s": time.process_time()}


LAG_TICK = 0.01  # seconds between the load process's looks at its own event loop


async def loop_lag(until: float, lags: list[float]) -> None:
    """How late the load process's event loop wakes a 10 ms sleep, in ms: what the
    client itself adds to every time it measures."""
    while time.monotonic() < until:
        asked = time.perf_counter()
        await asyncio.sleep(LAG_TICK)
        lags.append((time.perf_counter() - asked - LAG_TICK) * 1000)


SERVER_PARTS = ("app", "queue", "view", "cpu", "runq", "gc")


def server_timing(header: str | None) -> dict[str, float]:
    """``Server-Timing: app;dur=12.3, view;dur=4.0`` as {"app": 12.3, "view": 4.0}."""
    found: dict[str, float] = {}
    for entry in (header or "").split(","):
        name, _, params = entry.strip().partition(";")
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key == "dur" and name:
                with contextlib.suppress(ValueError):
                    found[name] = float(value)
    return found


def _http_clients(
    site: str, cookie: str, requests: dict, clients: int, seconds: float, out: str,
    think: tuple[float, float] | None = None,
) -> None:  # fmt: skip
    """The 50 clients, in a process of their own (so they never wait behind the feeder)."""
    loads = asyncio.run(_load(site, cookie, requests, clients, seconds, think))
    Path(out).write_bytes(orjson.dumps(loads))


async def _subscribers(url: str, address: str, cookie: str, count: int, ready: Any, stop: Any):
    seen = [_Arrivals(url) for _ in range(count)]
    readies = [asyncio.Event() for _ in range(count)]

    class Flag:  # _websocket_client's ready/stop are process events; adapt them
        def __init__(self, event: asyncio.Event) -> None:
            self.event = event

        def set(self) -> None:
            self.event.set()

    tasks = [
        asyncio.ensure_future(_websocket_client(address, cookie, s, Flag(r), stop))
        for s, r in zip(seen, readies, strict=True)
    ]
    await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 60)
    ready.set()
    lags: list[tuple[float, float]] = []
    watching = asyncio.ensure_future(stamped_loop_lag(lags))
    await asyncio.gather(*tasks)
    watching.cancel()
    return {"seen": [s.seen for s in seen], "lags": lags}


async def stamped_loop_lag(lags: list[tuple[float, float]]) -> None:
    """``loop_lag`` with the wall-clock time of each look, until cancelled: the subscribers'
    own lateness, to set against the frames' by time."""
    while True:
        asked = time.perf_counter()
        await asyncio.sleep(LAG_TICK)
        lags.append((time.time(), (time.perf_counter() - asked - LAG_TICK) * 1000))


def _ws_subscribers(
    url: str, address: str, cookie: str, count: int, ready: Any, stop: Any, out: str
) -> None:
    seen = asyncio.run(_subscribers(url, address, cookie, count, ready, stop))
    Path(out).write_bytes(orjson.dumps(seen))


def _feed(url: str, rate: float, seconds: float, stop: Any, out: str) -> None:
    feeder = Feeder(url, LATENCY_CLUSTER)
    feeder.run(rate, seconds, stop)
    Path(out).write_bytes(orjson.dumps(feeder.sent))


def summarise(samples: dict[str, Any]) -> dict[str, Any]:
    ms = sorted(samples["ms"])
    if not ms:
        return {"p50_ms": None, "p99_ms": None, "errors": samples["errors"], "n": 0}
    p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
    summary = {
        "p50_ms": round(statistics.median(ms), 1),
        "p99_ms": round(p99, 1),
        "max_ms": round(ms[-1], 1),
        "errors": samples["errors"],
        "n": len(ms),
    }
    if samples.get("bytes"):
        summary["kb_p50"] = round(statistics.median(samples["bytes"]) / 1024, 1)
    if samples.get("last_error"):
        summary["last_error"] = samples["last_error"]
    return summary


def _quantile(values: list[float], q: float) -> float | None:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1) if ordered else None


def server_parts(samples: dict[str, Any]) -> dict[str, Any]:
    """Where a page's time went: p50/p99 of each Server-Timing part (summed over the
    page's requests) and of ``outside``, the client's time less the server's ``app`` (the
    socket's accept queue, Daphne's parsing and writing, the load process's own lag)."""
    timed = [
        (ms, {name: samples[name][i] for name in SERVER_PARTS})
        for i, ms in enumerate(samples["ms"])
        if samples["app"][i] is not None
    ]
    parts: dict[str, Any] = {"timed": len(timed)}
    if not timed:
        return parts
    columns = {name: [p[name] or 0.0 for _, p in timed] for name in SERVER_PARTS}
    columns["outside"] = [ms - p["app"] for ms, p in timed]
    for name, values in columns.items():
        parts[f"{name}_p50_ms"] = _quantile(values, 0.5)
        parts[f"{name}_p99_ms"] = _quantile(values, 0.99)
    return parts


def tail_parts(
    http: dict[str, Any], share: float = 0.05, copies: list[Span] | None = None
) -> dict[str, Any]:
    """The slowest ``share`` of all pages' samples together: their median client time
    and the median of each part, so a tail reads as queue, view, gc or outside; with
    ``copies`` (``CopyWatch.spans``), how many of them overlapped a snapshot copy."""
    rows = []
    for page in PAGES:
        samples = http[page]
        for i, ms in enumerate(samples["ms"]):
            if samples["app"][i] is not None:
                parts = {name: samples[name][i] or 0.0 for name in SERVER_PARTS}
                rows.append((ms, {**parts, "outside": ms - parts["app"]}, samples["at"][i]))
    rows.sort(key=lambda row: row[0])
    slowest = rows[int(len(rows) * (1 - share)) :]
    if not slowest:
        return {"n": 0}
    tail = {"n": len(slowest), "share": share}
    tail["ms_p50"] = round(statistics.median(ms for ms, _, _ in slowest), 1)
    for name in (*SERVER_PARTS, "outside"):
        tail[f"{name}_p50_ms"] = round(statistics.median(p[name] for _, p, _ in slowest), 1)
    if copies is not None:
        tail["in_copies"] = overlapping(((at, at + ms / 1000) for ms, _, at in slowest), copies)
    return tail


def ws_latency(
    sent: dict[str, float], seen: list[dict[str, float]], warmup: float,
    until: float = float("inf"), relayed: dict[str, float] | None = None,
    lags: list[tuple[float, float]] | None = None, copies: list[Span] | None = None,
) -> dict:  # fmt: skip
    """Fed → frame at every subscriber, for pods fed after the first ``warmup`` seconds of
    the feed and before ``until`` (wall-clock time). With ``relayed`` (when each pod
    reached a plain member of the Channels group) and the subscribers' ``lags``: where the
    slowest 1 % of frames spent their time (``ws_tail``), and with ``copies`` how many of
    them overlapped a snapshot copy."""
    start = min(sent.values(), default=0.0) + warmup
    frames, missing = [], 0
    for times in seen:
        for name, at in sent.items():
            if at < start or at >= until:
                continue
            if name in times:
                frames.append((times[name] - at, name, times[name]))
            else:
                missing += 1
    frames.sort()
    if not frames:
        return {"p50_ms": None, "p99_ms": None, "missing": missing, "n": 0}
    p99 = frames[min(len(frames) - 1, int(0.99 * len(frames)))][0]
    result = {
        "p50_ms": round(1000 * statistics.median(f[0] for f in frames), 1),
        "p99_ms": round(1000 * p99, 1),
        "missing": missing,
        "n": len(frames),
    }
    if relayed is not None:
        slowest = frames[int(0.99 * len(frames)) :]
        result["tail"] = ws_tail(slowest, sent, relayed, lags or [])
        if copies is not None:
            result["tail"]["in_copies"] = overlapping(
                ((at - latency, at) for latency, _, at in slowest), copies
            )
    return result


def ws_tail(
    slowest: list[tuple[float, str, float]], sent: dict[str, float],
    relayed: dict[str, float], lags: list[tuple[float, float]],
) -> dict[str, Any]:  # fmt: skip
    """The slowest frames, split where a plain member of the cluster's Channels group got
    the pod: ``layer`` (fed → group message: the stream, the fold's read, its coalescing
    window and flush, the publisher, channels-redis) and ``daphne`` (group message →
    websocket frame: Daphne's consumer and its socket, the subscriber). ``subscriber_lag``
    is how late the subscribers' own event loop was in the 100 ms before each frame. The
    member runs in a process of its own: sharing the subscribers' loop, it was stamped in
    that loop's order with the frames ready in the same turn, and a Daphne leg of a few
    ms came out below 0."""
    layer = [relayed[name] - sent[name] for _, name, _ in slowest if name in relayed]
    daphne = [at - relayed[name] for _, name, at in slowest if name in relayed]
    stamps = [t for t, _ in lags]
    late = []
    for _, _, at in slowest:
        first, last = bisect.bisect_left(stamps, at - 0.1), bisect.bisect_right(stamps, at)
        late.append(max((lag for _, lag in lags[first:last]), default=0.0))
    tail: dict[str, Any] = {"n": len(slowest)}
    tail["ms_p50"] = round(1000 * statistics.median(f[0] for f in slowest), 1)
    for label, values in (("layer", layer), ("daphne", daphne)):
        tail[f"{label}_p50_ms"] = round(1000 * statistics.median(values), 1) if values else None
    tail["subscriber_lag_p50_ms"] = round(statistics.median(late), 1)
    spread = sorted({round(at) for _, _, at in slowest})
    tail["seconds"] = [format_time(spread[0]), format_time(spread[-1]), len(spread)]
    return tail


def ws_tail_note(tail: dict[str, Any] | None) -> str:
    if not tail:
        return ""
    return (
        f"; the slowest 1 % (median {tail['ms_p50']} ms): to the group {tail['layer_p50_ms']} "
        f"ms, then Daphne {tail['daphne_p50_ms']} ms; subscribers' own lag "
        f"{tail['subscriber_lag_p50_ms']} ms, within {tail['seconds'][2]} s"
    )


def run_pages(
    services: Services, clients: int = CLIENTS, seconds: float = 60.0,
    subscribers: int = WS_SUBSCRIBERS, rate: float = INGEST_RATE,
    think: tuple[float, float] = THINK_S,
) -> dict[str, Any]:  # fmt: skip
    """The measurement; the store must already hold ``CLUSTER``'s pods (``ingest``). The
    closed loop for ``seconds``, then the people for ``seconds``, with ingest throughout."""
    url = services.redis_url()
    client = redis.Redis.from_url(url)
    pods = int(client.hlen(store.pods_key(CLUSTER)))
    if not pods:
        raise RuntimeError("no pods stored: run the ingest section first")
    if clusters.cluster(client, CLUSTER) is None:  # ingest folds without registering it
        clusters.register_cluster(client, clusters.ClusterConfig(name=CLUSTER, kind="trace"))
    nodes = int(store.fold_state(client, CLUSTER).get("nodes") or 0)
    targets = sample_pods(client, CLUSTER, 300)
    requests = page_requests(targets, search_terms(targets[:50]))
    cookie, address = services.fold_stack(LATENCY_CLUSTER)
    site = f"http://{address}"
    context = multiprocessing.get_context("spawn")
    work = services.workdir
    # Warm Django's URLconf and the caches; in a process of its own, as the load is (this
    # one may be driving a browser, whose event loop asyncio.run() would refuse).
    warm = context.Process(
        target=_http_clients, args=(site, cookie, requests, 4, 3.0, str(work / "pages-warm.json"))
    )
    warm.start()
    warm.join()
    ready, stop = context.Event(), context.Event()
    subs = context.Process(
        target=_ws_subscribers,
        args=(url, address, cookie, subscribers, ready, stop, str(work / "pages-ws.json")),
    )
    subs.start()
    # A plain member of the group, in a process of its own as the latency bench's: what
    # reached the layer, when, stamped by no loop the subscribers' frames wait in.
    relay_ready = context.Event()
    relay = context.Process(
        target=_listener,
        args=("group", url, address, cookie, relay_ready, stop, str(work / "pages-relay.json")),
    )
    relay.start()
    if not ready.wait(90):
        raise RuntimeError("the websocket subscribers did not connect")
    if not relay_ready.wait(90):
        raise RuntimeError("the group member did not join the cluster's group")
    fed = context.Event()
    feed = context.Process(
        target=_feed,
        args=(url, rate, 2 * seconds + SETTLE_MAX_S + 5, fed, str(work / "pages-sent.json")),
    )
    feed.start()  # for both phases, the settling between them and their processes' start
    cpu = _CPU(services, {"feeder": feed.pid, "subscribers": subs.pid})
    closed = _phase_run(context, site, cookie, requests, clients, seconds, None, client, cpu)
    settled = settle(client, LATENCY_CLUSTER, SETTLE_MAX_S)
    people = _phase_run(context, site, cookie, requests, clients, seconds, think, client, cpu)
    fed.set()
    feed.join()
    caught_up(client, LATENCY_CLUSTER, timeout=60)
    time.sleep(1.0)  # the last fed pods through Daphne
    stop.set()
    subs.join(timeout=60)
    relay.join(timeout=60)
    if feed.exitcode != 0:
        raise RuntimeError(f"the feeder failed; see {work}")
    sent = orjson.loads((work / "pages-sent.json").read_bytes())
    arrivals = orjson.loads((work / "pages-ws.json").read_bytes())
    relayed = orjson.loads((work / "pages-relay.json").read_bytes())["group"]
    client.close()
    for phase, warmup in ((closed, 1.0), (people, 0.0)):
        began, ended = phase.pop("window")
        phase["fed_events_per_s"] = fed_rate(sent, began, ended)
        start = min(sent.values(), default=began)
        measured = ws_latency(
            sent, arrivals["seen"], warmup=max(warmup, began - start), until=ended,
            relayed=relayed, lags=arrivals["lags"], copies=phase.pop("copy_spans"),
        )  # fmt: skip
        phase["ws"] = {**measured, "subscribers": subscribers}
    # The closed loop keeps the keys it always had (pages.<page>, ws, ingest_events_per_s).
    result: dict[str, Any] = {**closed, "closed_loop": {"think_s": None}}
    result["people"] = {**people, "think_s": list(think), "settled": settled}
    result["ingest_target_per_s"] = rate
    result["clients"] = clients
    result["seconds"] = seconds
    result["store_pods"] = pods
    result["store_nodes"] = nodes
    result["web_processes"] = services.web_processes
    return result


def fed_rate(sent: dict[str, float], began: float, ended: float) -> int:
    """Pods the feeder handed over per second between ``began`` and ``ended`` (its
    ``sent`` times, epoch seconds). The feeder keeps a schedule of 2,000 a second but runs
    on the same cores: starved, it falls behind and catches up in bursts, so what a phase
    folded is to be read beside what it was fed."""
    if ended <= began:
        return 0
    return round(sum(1 for at in sent.values() if began <= at < ended) / (ended - began))


SLOWLOG_MAX = 1000  # entries read back; Redis keeps slowlog-max-len (128 by default)

# The people start once the fold is back within SETTLE_LAG_S of the feed: a saturated closed
# loop leaves the fold behind, and its backlog would otherwise be billed to the people.
SETTLE_LAG_S, SETTLE_MAX_S = 0.5, 60.0


def settle(client: redis.Redis, cluster: str, timeout: float) -> dict[str, Any]:
    """Wait, the feed still running, until the fold's lag is under ``SETTLE_LAG_S``:
    how long it took, the lag found at the start, and whether it got there."""
    started = time.monotonic()
    first = lag = fold_lag(client, cluster)
    while lag >= SETTLE_LAG_S and time.monotonic() - started < timeout:
        time.sleep(0.1)
        lag = fold_lag(client, cluster)
    return {
        "seconds": round(time.monotonic() - started, 1), "lag_before_s": round(first, 2),
        "lag_after_s": round(lag, 2), "reached": lag < SETTLE_LAG_S,
    }  # fmt: skip


def redis_slow(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Redis's own slow log over a phase (commands that ran ≥ slowlog-log-slower-than,
    10 ms by default): while one runs, every other client of that Redis waits."""
    by_command: dict[str, float] = {}
    for entry in entries:
        name = _command(entry["command"]).split(" ", 1)[0].upper()
        by_command[name] = by_command.get(name, 0.0) + entry["duration"] / 1000
    durations = [entry["duration"] / 1000 for entry in entries]
    slowest = sorted(entries, key=lambda entry: -entry["duration"])[:SLOWEST]
    return {
        "n": len(entries),
        "total_ms": round(sum(durations), 1),
        "max_ms": round(max(durations, default=0.0), 1),
        "by_command_ms": {name: round(ms, 1) for name, ms in sorted(by_command.items())},
        "slowest": [
            [round(entry["duration"] / 1000, 1), _command(entry["command"])[:SHOWN]]
            for entry in slowest
        ],
    }


SLOWEST, SHOWN = 10, 100  # slow log entries kept in the JSON, characters of each


def _command(command: bytes | str) -> str:
    return command.decode("latin-1") if isinstance(command, bytes) else str(command)


class _CPU:
    """CPU time of the bench's services and of its own long-lived children, read from
    /proc: each one's share of the cores during a phase."""

    def __init__(self, services: Services, children: dict[str, int | None]) -> None:
        self.services = services
        self.children = {name: pid for name, pid in children.items() if pid}

    def now(self) -> dict[str, float]:
        used = {name: self.services.cpu_seconds(name) for name in ("redis", "worker", "daphne")}
        # The fold's snapshots are written by forked copies that exit: their time is
        # their parent's children's (cutime, cstime) once reaped.
        worker = self.services.named["worker"]
        used["worker_reaped"] = sum(
            _process_cpu(pid, reaped=True)
            for pid in group_members(worker.pid, start_time(worker.pid) or 0)
        )
        for name, pid in self.children.items():
            used[name] = _process_cpu(pid)
        used.update(machine_cpu())
        return used

    def cores_since(self, before: dict[str, float], elapsed: float) -> dict[str, float]:
        after = self.now()
        return {name: round((after[name] - before[name]) / elapsed, 2) for name in after}


def machine_cpu(stat: str = "/proc/stat") -> dict[str, float]:
    """Seconds the whole machine's cores have been busy (``machine``: user, nice, system,
    interrupts) and given by the hypervisor to other guests while this one had work to
    run (``steal``: time its work was not in fact running); zeros where /proc does not
    tell."""
    try:
        with open(stat) as lines:
            fields = [int(f) for f in lines.readline().split()[1:9]]
    except (OSError, ValueError):
        return {"machine": 0.0, "steal": 0.0}
    fields += [0] * (8 - len(fields))  # kernels before 2.6.11 stop short of steal
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    tick = os.sysconf("SC_CLK_TCK")
    return {"machine": (user + nice + system + irq + softirq) / tick, "steal": steal / tick}


def _process_cpu(pid: int, reaped: bool = False) -> float:
    """utime + stime of ``pid``, or with ``reaped`` those of its children it has waited
    for (cutime + cstime)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    first = 13 if reaped else 11
    return (int(fields[first]) + int(fields[first + 1])) / os.sysconf("SC_CLK_TCK")


def _phase_run(
    context: Any, site: str, cookie: str, requests: dict, clients: int, seconds: float,
    think: tuple[float, float] | None, client: redis.Redis, cpu: _CPU,
) -> dict[str, Any]:  # fmt: skip
    """One client model for ``seconds`` while the feed runs: its pages, pages served per
    second, ingest held, and its wall-clock window (for the websocket frames fed in it)."""
    name = "people" if think else "closed"
    out = cpu.services.workdir / f"pages-http-{name}.json"
    folded_before = int(client.hlen(store.pods_key(LATENCY_CLUSTER)))
    began, started = time.time(), time.monotonic()
    used = cpu.now()
    client.slowlog_reset()
    load = context.Process(
        target=_http_clients, args=(site, cookie, requests, clients, seconds, str(out), think)
    )
    with CopyWatch(cpu.services.named["worker"].pid) as copies:
        load.start()
        load.join()
    elapsed = time.monotonic() - started
    if load.exitcode != 0:
        raise RuntimeError(f"a load process failed; see {cpu.services.workdir}")
    cores = cpu.cores_since(used, elapsed)
    folded = int(client.hlen(store.pods_key(LATENCY_CLUSTER))) - folded_before
    load_out = orjson.loads(out.read_bytes())
    http = load_out["pages"]
    result: dict[str, Any] = {
        page: {**summarise(http[page]), "server": server_parts(http[page])} for page in PAGES
    }
    result["tail"] = tail_parts(http, copies=copies.spans)
    result["copies"] = copies_summary(copies.spans, (began, time.time()))
    result["copy_spans"] = copies.spans
    result["redis_slow"] = redis_slow(client.slowlog_get(SLOWLOG_MAX))
    cores["load"] = round(load_out["cpu_s"] / elapsed, 2)
    result["cpu_cores"] = cores
    lags = load_out["loop_lag_ms"]
    result["client_loop_lag"] = {
        "p50_ms": _quantile(lags, 0.5), "p99_ms": _quantile(lags, 0.99),
        "max_ms": _quantile(lags, 1.0),
    }  # fmt: skip
    result["pages_per_s"] = round(sum(len(http[page]["ms"]) for page in PAGES) / elapsed, 1)
    result["ingest_events_per_s"] = round(folded / elapsed)
    result["window"] = (began, time.time())
    return result


def run_pages_benchmarks(results: Results, services: Services, seconds: float) -> None:
    report_pages(results, run_pages(services, seconds=seconds))


def report_pages(results: Results, pages: dict[str, Any]) -> None:
    """The section's JSON and its figures: the 300 ms target judged on the 50 people at
    150,000 pods; the closed loop (saturation) reported beside its throughput."""
    results.sections["pages"] = pages
    scale = f"{pages['store_pods']:,} pods, {pages['store_nodes']:,} nodes"
    web = f"{pages['web_processes']} Daphne processes"
    closed = f"closed loop: {pages['clients']} clients, no think time, {pages['seconds']:.0f} s"
    low, high = pages["people"]["think_s"]
    people = f"{pages['clients']} people, think {low:g} to {high:g} s, {pages['seconds']:.0f} s"
    at_scale = pages["store_pods"] >= 150_000
    _page_figures(results, "pages", pages, None, f"{closed}, ingest {INGEST_RATE}/s; {scale}")
    _page_figures(
        results, "pages, 50 people", pages["people"], at_scale,
        f"{people}, ingest {INGEST_RATE}/s; {scale}; {web}",
    )  # fmt: skip
    for label, phase, how, judged in (
        ("pages", pages, closed, False),
        ("pages, 50 people", pages["people"], people, True),
    ):
        ws = phase["ws"]
        ws_tail_of = ws.get("tail") or {}
        ws_n = ws_tail_of.get("n", 0)
        results.add(
            Figure(
                f"{label}: websocket subscribers on the board, fed → frame",
                ws["p99_ms"] if ws["p99_ms"] is not None else float("nan"),
                "ms p99",
                target=f"p99 ≤ {P99_TARGET_MS:.0f} ms"
                if judged
                else "reported, not judged (saturation)",
                met=(
                    ws["p99_ms"] is not None and ws["p99_ms"] <= P99_TARGET_MS and not ws["missing"]
                )
                if judged
                else None,
                note=f"p50 {ws['p50_ms']} ms, {ws['subscribers']} subscribers, "
                f"{ws['missing']} frames missing{ws_tail_note(ws_tail_of)}"
                f"{copies_note(phase.get('copies'), ws_tail_of.get('in_copies'), ws_n)}; {how}",
            )
        )
        tail = phase["tail"]
        if tail["n"]:
            results.add(
                Figure(
                    f"{label}: the slowest 5 % of pages, where the time went",
                    tail["ms_p50"],
                    "ms median",
                    note=", ".join(
                        f"{name} {tail[f'{name}_p50_ms']}"
                        for name in ("queue", "view", "cpu", "runq", "gc", "outside")
                    )
                    + f" ms (medians over {tail['n']} loads; Server-Timing)"
                    + copies_note(phase.get("copies"), tail.get("in_copies"), tail["n"])
                    + f"; {how}",
                )
            )
        held = phase["ingest_events_per_s"]
        results.add(
            Figure(
                f"{label}: ingest held during the load",
                held,
                "events/s folded",
                target=f"≥ {INGEST_RATE * 0.95:,.0f} events/s (fed at {INGEST_RATE:,}/s)",
                met=held >= INGEST_RATE * 0.95,
                note=f"pods folded into the fed cluster per second; the feeder handed over "
                f"{phase['fed_events_per_s']:,}/s in the same time; {how}; {scale}",
            )
        )
        results.add(
            Figure(
                f"{label}: the machine's cores in use",
                phase["cpu_cores"]["machine"],
                "cores",
                note=f"of {os.cpu_count()}; {cores_note(phase['cpu_cores'])}; {how}",
            )
        )
        results.add(
            Figure(
                f"{label}: pages served",
                phase["pages_per_s"],
                "pages/s",
                note=f"samples (HTML and its JSON) answered per second; {how}; {web}",
            )
        )


def cores_note(cores: dict[str, float]) -> str:
    """Who used the cores, and what the hypervisor took."""
    parts = ", ".join(
        f"{name} {used}" for name, used in cores.items() if name not in ("machine", "steal")
    )
    return f"{parts}; stolen by the host {cores['steal']}"


def _page_figures(
    results: Results, label: str, phase: dict[str, Any], judged: bool | None, note: str
) -> None:
    """One figure per page; ``judged`` None: reported only (the closed loop)."""
    for page in PAGES:
        row = phase[page]
        p99 = row["p99_ms"]
        met = None
        if judged:
            met = p99 is not None and p99 <= P99_TARGET_MS and not row["errors"]
        results.add(
            Figure(
                f"{label}: {page}",
                p99 if p99 is not None else float("nan"),
                "ms p99",
                target=f"p99 ≤ {P99_TARGET_MS:.0f} ms, 0 errors at 150,000 pods"
                if judged is not None
                else "reported, not judged (saturation)",
                met=met,
                note=f"p50 {row['p50_ms']} ms over {row['n']} loads, {row['errors']} errors, "
                f"{row.get('kb_p50')} KB sent per load (median); {note}",
            )
        )
