"""docker-compose.yml: no Docker engine here, so check that every command names something
this project really has (an importable Celery app, an ASGI application, a manage.py
command) and that the services share one image."""

from pathlib import Path

import pytest
import yaml
from celery import Celery
from celery.app.utils import find_app
from django.conf import settings
from django.core.management import get_commands, load_command_class
from django.core.management.base import CommandError
from django.utils.module_loading import import_string

from devtools.devstack import SIMULATOR_ARGS

BASE_DIR = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((BASE_DIR / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
HANDOFF_SERVICES = [name for name in SERVICES if name != "redis"]


def command(service: str) -> list[str]:
    return SERVICES[service]["command"]


def option(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_it_has_the_documented_services():
    assert {"redis", "web", "worker", "beat", "simulator"} <= set(SERVICES)
    assert SERVICES["simulator"]["profiles"] == ["simulator"]


def test_redis_persists_with_aof_on_a_volume():
    redis = SERVICES["redis"]
    assert redis["image"].startswith("redis:")
    assert option(redis["command"], "--appendonly") == "yes"
    volume, mount = redis["volumes"][0].split(":")
    assert mount == "/data"
    assert volume in COMPOSE["volumes"]


@pytest.mark.parametrize("service", HANDOFF_SERVICES)
def test_services_share_one_image_built_from_the_dockerfile(service):
    assert SERVICES[service]["build"] == "."
    assert SERVICES[service]["image"] == SERVICES["web"]["image"]
    assert (BASE_DIR / "Dockerfile").is_file()


@pytest.mark.parametrize("service", HANDOFF_SERVICES)
def test_services_point_at_the_redis_service(service):
    assert SERVICES[service]["environment"]["REDIS_URL"] == "redis://redis:6379/0"


def test_web_serves_the_asgi_application_with_daphne():
    from handoff.management.commands.serve import APPLICATION, daphne_argv

    argv = command("web")
    assert argv[:3] == ["python", "manage.py", "serve"]
    assert parses(argv[2:])
    assert option(argv, "-b") == "0.0.0.0"
    daphne = daphne_argv(3, APPLICATION)
    assert daphne[1:3] == ["-m", "daphne"]
    module, attribute = daphne[-1].split(":")
    assert module == "handoff.asgi"
    assert callable(import_string(f"{module}.{attribute}"))


@pytest.mark.parametrize("service", ["worker", "watcher", "beat"])
def test_celery_services_name_the_project_app(service):
    argv = command(service)
    assert argv[:2] == ["celery", "-A"]
    app = find_app(argv[2])
    assert isinstance(app, Celery)
    assert app.main == "handoff"


def test_the_workers_consume_the_default_and_watch_queues_apart():
    assert option(command("worker"), "-Q") == "default"
    assert option(command("watcher"), "-Q") == "watch"


def test_the_watcher_hosts_a_clusters_streams_and_has_a_spare_process():
    # One stream host per process holds a cluster's watches and fold; the spare process
    # runs the host supervise starts when the first is full or killed.
    assert int(option(command("watcher"), "-c")) >= 2
    assert settings.HANDOFF_STREAMS_PER_WORKER >= 4


@pytest.mark.parametrize("service", ["migrate", "simulator"])
def test_management_commands_exist(service):
    argv = command(service)
    assert argv[:2] == ["python", "manage.py"]
    assert argv[2] in get_commands()


def test_every_program_is_installed_by_the_requirements():
    import shutil
    import sys

    bin_dir = Path(sys.executable).parent
    for service in HANDOFF_SERVICES:
        program = command(service)[0]
        assert program == "python" or (bin_dir / program).exists() or shutil.which(program)


def parses(argv: list[str]) -> bool:
    """Whether manage.py would accept `argv` (a command and its options)."""
    app = get_commands()[argv[0]]
    parser = load_command_class(app, argv[0]).create_parser("manage.py", argv[0])
    try:
        parser.parse_args(argv[1:])
    except CommandError:
        return False
    return True


@pytest.mark.parametrize("service", ["migrate", "simulator"])
def test_management_command_options_are_accepted(service):
    assert parses(command(service)[2:])


def test_the_demo_starts_the_simulator_with_accepted_options():
    assert parses(SIMULATOR_ARGS)
