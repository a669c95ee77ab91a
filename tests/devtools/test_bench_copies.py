"""The pages bench's watch on the fold's snapshot copies (devtools/bench/copies.py): spans
from a real process group whose leader forks, and the slowest samples set against them."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from devtools.bench import copies, pages


@pytest.mark.parametrize("own_session", [False, True])
def test_a_copy_forked_in_the_group_is_a_span_and_the_members_before_it_are_not(own_session):
    script = (
        "import os, time\n"
        "time.sleep(0.3)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        f"    if {own_session}: os.setsid()\n"
        "    time.sleep(0.4)\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "time.sleep(30)\n"
    )
    leader = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    try:
        time.sleep(0.1)
        with copies.CopyWatch(leader.pid) as watch:
            time.sleep(1.2)
        assert len(watch.spans) == 1
        began, ended = watch.spans[0]
        assert 0.3 <= ended - began <= 0.4 + 3 * copies.COPY_TICK + 0.2
    finally:
        leader.kill()
        leader.wait()


def test_a_copy_still_running_when_the_watch_ends_is_cut_there():
    watch = copies.CopyWatch(1)
    watch.known = {10, 11}
    watch.look({10, 11, 12}, 100.0)
    watch.look({10, 11, 12, 13}, 100.5)
    watch.look({10, 11, 13}, 101.0)
    assert watch.spans == [(100.0, 101.0)]
    watch.close(102.0)
    assert watch.spans == [(100.0, 101.0), (100.5, 102.0)]
    assert not watch.running


def test_overlaps_and_the_share_of_the_window():
    spans = [(10.0, 11.0), (20.0, 20.5)]
    intervals = [(9.5, 10.1), (11.0, 12.0), (20.2, 20.3), (15.0, 16.0)]
    assert copies.overlapping(intervals, spans) == 2  # touching at 11.0 is not sharing
    summary = copies.copies_summary([(5.0, 10.5), *spans], (10.0, 30.0))
    assert summary == {"n": 3, "s_p50": 0.5, "share": 0.1}
    assert copies.copies_summary([], (10.0, 30.0)) == {"n": 0, "s_p50": None, "share": 0.0}
    note = copies.copies_note(summary, 4, 50)
    assert note == "; 3 snapshot copies ran 10 % of the time, 4 of these 50 overlapped one"
    assert copies.copies_note(None, 4, 50) == ""


def test_the_slowest_pages_and_frames_are_counted_in_the_copies():
    samples: dict = {"ms": [], "at": [], "errors": 0, **{n: [] for n in pages.SERVER_PARTS}}
    for i in range(100):
        slow = i >= 95
        samples["ms"].append(400.0 if slow else 10.0)
        samples["at"].append(1000.0 + i)
        for name in pages.SERVER_PARTS:
            samples[name].append(0.0)
        samples["app"][-1] = 350.0 if slow else 9.0
    http = dict.fromkeys(pages.PAGES, samples)
    spans = [(1096.2, 1097.1), (1010.0, 1011.0)]
    tail = pages.tail_parts(http, share=0.05, copies=spans)
    assert tail["n"] == 30  # 5 % of 600: the five slow loads of each of the six pages
    # the slow loads started at 1095..1099 and took 0.4 s: 1096 and 1097 overlap, per page
    assert tail["in_copies"] == 12
    assert "in_copies" not in pages.tail_parts(http, share=0.05)

    sent = {f"p{n}": 100.0 + n * 0.01 for n in range(200)}
    seen = [{name: at + 0.02 for name, at in sent.items()}]
    seen[0]["p7"] = sent["p7"] + 0.5
    seen[0]["p150"] = sent["p150"] + 0.4
    relayed = {name: at + 0.01 for name, at in sent.items()}
    ws = pages.ws_latency(sent, seen, warmup=0.0, relayed=relayed, lags=[], copies=[(101.4, 101.6)])
    assert ws["tail"]["n"] == 2
    assert ws["tail"]["in_copies"] == 1  # p150 (101.5 → 101.9), not p7 (100.07 → 100.57)
