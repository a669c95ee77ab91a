"""``manage.py fidelity``: a scenario on the built-in simulator and attached to a real
control plane, and what differs between the two, situation by situation."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

import orjson
from django.core.management.base import BaseCommand, CommandError, CommandParser

from devtools import fidelity, kubeassets
from handoff.attach.kube import AttachError
from handoff.management.cliargs import at_least
from handoff.sim import SCENARIOS
from handoff.sim.versions import kubelet_version

ATTACHABLE = sorted(name for name, s in SCENARIOS.items() if s.attachable)


class Command(BaseCommand):
    help = (
        "Run a scenario on the simulator and attached to a real control plane; print per "
        "situation what differs (verdict, binding, reason, events, watch updates, timing)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--scenario", choices=ATTACHABLE, default="fidelity", help="default: fidelity"
        )
        parser.add_argument(
            "--duration", type=float, help="seconds to run each side (default: the scenario's)"
        )
        parser.add_argument(
            "--kubeconfig",
            help="a real API server to attach to, with rights to register nodes and create "
            "pods (default: start a control plane from HANDOFF_K8S_ASSETS)",
        )
        parser.add_argument("--context", help="with --kubeconfig: the context to use")
        parser.add_argument(
            "--k8s-version",
            metavar="X.Y",
            help="the simulator follows this release's shapes (default: the API server's)",
        )
        parser.add_argument(
            "--tolerance",
            type=float,
            default=30.0,
            help="seconds two runs' deletion times may differ by (default 30: PodGC acts "
            "40-80 s after a node goes, on a 20 s tick whose phase the runs do not share)",
        )
        parser.add_argument(
            "--stuck-after", type=float, default=60.0, help="as triage's (default 60)"
        )
        parser.add_argument("--keep", help="keep the two traces in this folder")
        parser.add_argument("--json", action="store_true", help="print JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        settings = _settings(options)
        # The client's pool logs each retry of an unreachable server; the error says it once.
        logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
        if options["keep"]:
            workdir = Path(options["keep"])
            workdir.mkdir(parents=True, exist_ok=True)
            self._measure(settings, options, workdir)
            return
        with tempfile.TemporaryDirectory(prefix="handoff-fidelity-") as folder:
            self._measure(settings, options, Path(folder))

    def _measure(self, settings: fidelity.Settings, options: dict[str, Any], work: Path) -> None:
        say = self.stderr.write
        try:
            if options["kubeconfig"]:
                result = fidelity.measure(settings, options["kubeconfig"], work)
            else:
                with fidelity.real_control_plane(say) as kubeconfig:
                    say(f"running {settings.scenario.name} attached ({settings.duration:.0f} s)")
                    result = fidelity.measure(settings, kubeconfig, work)
        except kubeassets.AssetsMissing as exc:
            raise CommandError(f"no control plane to compare with: {exc}") from exc
        except AttachError as exc:
            raise CommandError(str(exc)) from exc
        except (OSError, RuntimeError, TimeoutError) as exc:
            raise CommandError(f"starting the control plane failed: {exc}") from exc
        if options["json"]:
            self.stdout.write(orjson.dumps(result.json(), option=orjson.OPT_INDENT_2).decode())
            return
        for line in result.text():
            self.stdout.write(line)


def _settings(options: dict[str, Any]) -> fidelity.Settings:
    scenario = SCENARIOS[options["scenario"]]
    duration = options["duration"] if options["duration"] is not None else scenario.duration
    if duration is None:
        raise CommandError(f"--duration: scenario {scenario.name!r} runs until stopped")
    at_least("--duration", duration, 1.0)
    at_least("--tolerance", options["tolerance"], 0.0)
    at_least("--stuck-after", options["stuck_after"], 0.0)
    if options["k8s_version"]:
        try:
            kubelet_version(options["k8s_version"])
        except ValueError as exc:
            raise CommandError(f"--k8s-version: {exc}") from exc
    if options["context"] and not options["kubeconfig"]:
        raise CommandError("--context needs --kubeconfig")
    if options["kubeconfig"] and not Path(options["kubeconfig"]).is_file():
        raise CommandError(f"--kubeconfig: {options['kubeconfig']}: no such file")
    return fidelity.Settings(
        scenario,
        duration,
        options["k8s_version"],
        options["tolerance"],
        options["stuck_after"],
        options["context"],
    )
