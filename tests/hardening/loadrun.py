"""The load check of issue 9, as a function a test and `manage.py bench` can both run:
``clients`` signed-in websocket clients on Daphne and ``api_rps`` API requests per second
while a feeder hands ``rate`` watch events per second to a real fold task in a Celery
worker, all on loopback, for ``seconds``.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from pathlib import Path
from typing import Any

import orjson

from devtools.bench import Feeder, Services, caught_up, percentiles
from handoff.live import store

CLUSTER = "load"


def _feed(url: str, rate: float, seconds: float) -> None:
    Feeder(url, CLUSTER).run(rate, seconds)


async def _websocket(address: str, cookie: str, stats: dict[str, Any], stop: asyncio.Event) -> None:
    import aiohttp

    headers = {"Origin": f"http://{address}", "Cookie": f"sessionid={cookie}"}
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(
                f"ws://{address}/ws/clusters/{CLUSTER}/", headers=headers, max_msg_size=0
            ) as ws,
        ):
            hello = await ws.receive_json(timeout=30)
            if hello.get("type") != "hello":
                stats["errors"].append(f"refused: {str(hello)[:200]}")
                return
            stats["connected"] += 1
            frames = 0
            while not stop.is_set():
                try:
                    frame = await ws.receive(timeout=0.5)
                except TimeoutError:
                    continue
                if frame.type != aiohttp.WSMsgType.TEXT:
                    if not stop.is_set():
                        stats["errors"].append(f"websocket ended: {frame.type.name}")
                    break
                frames += 1
            stats["frames"].append(frames)
    except Exception as exc:  # every failure is counted and reported, not raised
        stats["errors"].append(f"websocket: {type(exc).__name__}: {exc}"[:300])


async def _api(
    address: str, cookie: str, rps: float, stats: dict[str, Any], stop: asyncio.Event
) -> None:
    import aiohttp

    paths = [
        f"/api/clusters/{CLUSTER}/pods?attention=1",
        f"/api/clusters/{CLUSTER}/summary",
        f"/api/clusters/{CLUSTER}/pods?verdict=running&limit=50",
    ]
    headers = {"Cookie": f"sessionid={cookie}"}
    async with aiohttp.ClientSession(headers=headers) as session:

        async def one(path: str) -> None:
            started = time.perf_counter()
            try:
                async with session.get(f"http://{address}{path}") as answer:
                    await answer.read()
                    if answer.status != 200:
                        stats["errors"].append(f"API {answer.status} {path}")
            except Exception as exc:
                stats["errors"].append(f"API: {type(exc).__name__}"[:300])
                return
            stats["api"].append(time.perf_counter() - started)

        tasks = []
        n = 0
        start = time.monotonic()
        while not stop.is_set():
            due = int((time.monotonic() - start) * rps)
            while n < due:
                tasks.append(asyncio.ensure_future(one(paths[n % len(paths)])))
                n += 1
            await asyncio.sleep(0.005)
        await asyncio.gather(*tasks)


async def _clients(
    address: str, cookie: str, clients: int, rps: float, seconds: float, out: str
) -> None:
    stats: dict[str, Any] = {"connected": 0, "errors": [], "frames": [], "api": []}
    stop = asyncio.Event()
    sockets = [
        asyncio.ensure_future(_websocket(address, cookie, stats, stop)) for _ in range(clients)
    ]
    deadline = time.monotonic() + 60
    while stats["connected"] + len(stats["errors"]) < clients and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    Path(out + ".ready").write_text("1")
    api = asyncio.ensure_future(_api(address, cookie, rps, stats, stop))
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(api, *sockets)
    Path(out).write_bytes(orjson.dumps(stats))


def _run_clients(
    address: str, cookie: str, clients: int, rps: float, seconds: float, out: str
) -> None:
    asyncio.run(_clients(address, cookie, clients, rps, seconds, out))


def load(
    workdir: Path, clients: int = 200, api_rps: float = 50, rate: float = 5000, seconds: float = 10
) -> dict[str, Any]:
    services = Services(workdir)
    try:
        url = services.redis_url()
        client, cookie, address = services.live_stack(CLUSTER)
        context = multiprocessing.get_context("spawn")
        out = str(workdir / "clients.json")
        # The clients run a little longer than the feed, so they see it drain.
        listeners = context.Process(
            target=_run_clients, args=(address, cookie, clients, api_rps, seconds + 3, out)
        )
        listeners.start()
        services._wait(lambda: Path(out + ".ready").exists(), "the websocket clients", 90)
        feeder = context.Process(target=_feed, args=(url, rate, seconds))
        started = time.monotonic()
        feeder.start()
        feeder.join()
        fed_in = time.monotonic() - started
        listeners.join(timeout=120)
        stats = orjson.loads(Path(out).read_bytes())
        # Under load the fold may still be behind the feed: nothing lost, only later.
        caught_up(client, CLUSTER, timeout=120)
        pods = client.hlen(store.pods_key(CLUSTER))
    finally:
        services.stop()
    frames = sorted(stats["frames"])
    return {
        "clients": clients,
        "connected": stats["connected"],
        "rate": rate,
        "fed_events": int(rate * seconds),
        "fed_in_s": round(fed_in, 2),
        "pods_stored": pods,
        "api": {**percentiles(stats["api"]), "rps": api_rps},
        "frames_per_client": {
            "min": frames[0] if frames else 0,
            "median": frames[len(frames) // 2] if frames else 0,
        },
        "errors": stats["errors"][:50],
        "error_count": len(stats["errors"]),
    }
