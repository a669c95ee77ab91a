"""`clusters add` checks before it saves: on any failure one line names the cause, the
exit status is 1 and nothing is left behind, in the database or in Redis."""

from __future__ import annotations

import gzip
import io
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import CommandError

from devtools.devstack import free_port
from handoff.live import clusters
from handoff.models import Cluster
from handoff.sim import Options, find_scenario
from handoff.sim.runner import serve
from tests.conftest import BASE_DIR, python_env

pytestmark = pytest.mark.django_db(transaction=True)


def kubeconfig(path: Path, server: str, context: str = "c", token: str = "t0ken") -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: c\n  cluster:\n    server: {server}\n"
        f"users:\n- name: u\n  user:\n    token: {token}\n"
        f"contexts:\n- name: {context}\n  context:\n    cluster: c\n    user: u\n"
        f"current-context: {context}\n"
    )
    return path


@pytest.fixture
def simulator():
    options = Options(seed=3, duration=600, start=float(int(time.time())))
    server, _, _ = serve(find_scenario("manual-scheduling", None), options, "127.0.0.1:0")
    yield server
    server.stop()


def refused(redis_client: redis.Redis, *args: str) -> str:
    with pytest.raises(CommandError) as caught:
        call_command("clusters", "add", "c1", *args, stdout=io.StringIO())
    assert not Cluster.objects.filter(name="c1").exists()
    assert clusters.cluster(redis_client, "c1") is None
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_missing_kubeconfig(redis_client, tmp_path):
    message = refused(redis_client, "--kubeconfig", str(tmp_path / "nope"))
    assert message == f"kubeconfig {tmp_path / 'nope'} does not exist"


def test_a_kubeconfig_that_does_not_parse(redis_client, tmp_path):
    bad = tmp_path / "bad"
    bad.write_text("clusters: [\n")
    assert "does not parse" in refused(redis_client, "--kubeconfig", str(bad))


def test_an_unknown_context(redis_client, tmp_path, simulator):
    path = kubeconfig(tmp_path / "kc", simulator.address)
    message = refused(redis_client, "--kubeconfig", str(path), "--context", "prod")
    assert message == f"kubeconfig {path} has no context 'prod' (it has: c)"


def test_an_api_that_does_not_answer(redis_client, tmp_path):
    port = free_port()
    path = kubeconfig(tmp_path / "kc", f"http://127.0.0.1:{port}")
    message = refused(redis_client, "--kubeconfig", str(path))
    assert message.startswith(f"the API at http://127.0.0.1:{port} does not answer: ")
    assert "refused" in message.lower()
    # --no-check skips only the request.
    call_command(
        "clusters", "add", "c1", "--kubeconfig", str(path), "--no-check", stdout=io.StringIO()
    )
    assert clusters.cluster(redis_client, "c1") is not None


def test_an_api_that_is_not_kubernetes_there(redis_client, tmp_path, simulator):
    path = kubeconfig(tmp_path / "kc", simulator.address + "/nowhere")
    message = refused(redis_client, "--kubeconfig", str(path))
    assert message.startswith(
        f"the API at {simulator.address}/nowhere answered /version with HTTP 404"
    )


def test_a_working_kubeconfig_is_saved_in_both_places(redis_client, tmp_path, simulator):
    path = kubeconfig(tmp_path / "kc", simulator.address, context="prod")
    out = io.StringIO()
    call_command("clusters", "add", "c1", "--kubeconfig", str(path), stdout=out)
    assert out.getvalue().strip() == (
        f"added c1 (kubeconfig · context prod · {simulator.address} · v1.33.1-handoff-sim)"
    )
    assert Cluster.objects.get(name="c1").kubeconfig == str(path)
    assert clusters.cluster(redis_client, "c1").kubeconfig == str(path)
    # Adding it again says so, and changes nothing.
    message = refused_again(redis_client, path)
    assert (
        message == "a cluster named 'c1' exists already (python manage.py clusters remove c1 first)"
    )


def refused_again(redis_client, path):
    with pytest.raises(CommandError) as caught:
        call_command("clusters", "add", "c1", "--kubeconfig", str(path), stdout=io.StringIO())
    assert Cluster.objects.filter(name="c1").count() == 1
    return str(caught.value)


def test_a_trace_that_is_missing_or_not_a_trace(redis_client, tmp_path):
    assert refused(redis_client, "--trace", str(tmp_path / "x.jsonl")) == (
        f"trace {tmp_path / 'x.jsonl'} does not exist"
    )
    empty = tmp_path / "empty.jsonl.gz"
    empty.write_bytes(gzip.compress(b""))
    assert refused(redis_client, "--trace", str(empty)).startswith(f"{empty} holds no watch events")
    text = tmp_path / "notes.txt"
    text.write_text("hello, this is not a trace\n")
    assert refused(redis_client, "--trace", str(text)).startswith(f"{text} holds no watch events")


def test_a_real_trace_is_accepted(redis_client, tmp_path):
    trace = tmp_path / "t.jsonl"
    from handoff.sim import run

    run(find_scenario("manual-scheduling", None), Options(seed=1, duration=20), record=trace)
    out = io.StringIO()
    call_command("clusters", "add", "c1", "--trace", str(trace), stdout=out)
    assert out.getvalue().strip() == "added c1 (trace · t.jsonl (trace))"


def test_an_unknown_scenario(redis_client):
    message = refused(redis_client, "--simulator", "stedy")
    assert message.startswith("no simulator scenario 'stedy' (known: ")


def test_without_redis_nothing_is_saved_and_one_line_says_where(tmp_path):
    """From the command line, against a Redis that is not there."""
    port = free_port()
    env = python_env(REDIS_URL=f"redis://127.0.0.1:{port}/0", HANDOFF_RUN_DIR=str(tmp_path))
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=BASE_DIR, env=env, check=True, capture_output=True,
    )  # fmt: skip
    result = subprocess.run(
        [sys.executable, "manage.py", "clusters", "add", "c1", "--simulator", "steady"],
        cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"cannot reach Redis at redis://127.0.0.1:{port}/0 (from REDIS_URL): "
        "check that it runs, or fix REDIS_URL\n"
    )
    listed = subprocess.run(
        [sys.executable, "manage.py", "clusters", "list"],
        cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert listed.stdout.strip() == "NAME  KIND  WHERE"


def test_remove_without_redis_keeps_the_cluster(tmp_path):
    port = free_port()
    env = python_env(REDIS_URL=f"redis://127.0.0.1:{port}/0", HANDOFF_RUN_DIR=str(tmp_path))
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput"], cwd=BASE_DIR, env=env, check=True,
                   capture_output=True)  # fmt: skip
    shell = (
        "from handoff.models import Cluster; from django.db import models; "
        "models.Model.save(Cluster(name='c1', kind='simulator', scenario='steady'))"
    )
    subprocess.run([*manage, "shell", "-c", shell], cwd=BASE_DIR, env=env, check=True,
                   capture_output=True)  # fmt: skip
    result = subprocess.run([*manage, "clusters", "remove", "c1"], cwd=BASE_DIR, env=env,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.startswith(f"cannot reach Redis at redis://127.0.0.1:{port}/0")
    listed = subprocess.run([*manage, "clusters", "list"], cwd=BASE_DIR, env=env,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "c1" in listed.stdout
