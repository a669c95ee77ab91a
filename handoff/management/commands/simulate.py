"""``manage.py simulate``: run a simulated cluster scenario, record it as a trace v1 file."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from handoff.management.cliargs import address, at_least, writable
from handoff.management.cliargs import speed as parse_speed
from handoff.sim import SCENARIOS, Options, find_scenario, run
from handoff.sim.attached.driver import NodeFault
from handoff.sim.runner import serve
from handoff.sim.serve.faults import load_faults
from handoff.sim.versions import NEWEST, kubelet_version


class Command(BaseCommand):
    help = "Run a simulated cluster (scheduler, kubelets, PodGC, node lifecycle) and record it."

    # Set when run from the command line: the process ends with the command.
    exiting = False

    def run_from_argv(self, argv: list[str]) -> None:
        """From the command line, end the process as soon as the trace is closed.

        Tearing down a big simulated cluster object by object (a gigabyte of dicts at
        5,000 nodes and 150,000 pods) takes longer than building it; the operating system
        reclaims the memory at once. Everything is written and closed before this point.
        """
        self.exiting = True
        super().run_from_argv(argv)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    def add_arguments(self, parser: CommandParser) -> None:
        where = parser.add_mutually_exclusive_group()
        where.add_argument(
            "--scenario", choices=sorted(SCENARIOS), help="a named scenario (default: steady)"
        )
        where.add_argument("--file", help="a YAML scenario file (see docs/simulator.md)")
        parser.add_argument("--seed", type=int, default=0, help="RNG seed (default 0)")
        parser.add_argument(
            "--speed",
            default=None,
            help="virtual seconds per wall second, or 'max' (default: max with --record, else 1)",
        )
        parser.add_argument(
            "--duration",
            type=float,
            default=None,
            help="virtual seconds to run (default: the scenario's; steady runs until Ctrl-C)",
        )
        parser.add_argument("--record", help="write the trace here (.gz to compress)")
        parser.add_argument("--nodes", type=int, help="scale/steady: number of nodes")
        parser.add_argument("--pods", type=int, help="scale: number of pods")
        parser.add_argument("--churn", type=float, help="scale/steady: pods created per second")
        parser.add_argument(
            "--serve",
            metavar="HOST:PORT",
            help="serve the simulated cluster's Kubernetes API here (e.g. 127.0.0.1:8080)",
        )
        parser.add_argument(
            "--kubeconfig",
            default=None,
            help="with --serve: where to write a kubeconfig for it (default "
            ".run/sim-PORT.kubeconfig, its own file: another simulator never rewrites it)",
        )
        parser.add_argument(
            "--faults",
            metavar="FILE|SPEC",
            help="with --serve: faults to inject (a JSON/YAML file, inline JSON, or e.g. "
            "'cut-watch:resource=pods:count=2,throttle:retry_after=3'; see docs/simulator.md)",
        )
        parser.add_argument(
            "--paused",
            action="store_true",
            help="with --serve: start with the clock paused (virtual time 0) until "
            'POST /_sim/clock {"running": true}',
        )
        parser.add_argument(
            "--attach",
            metavar="KUBECONFIG",
            help="run the scenario's nodes and kubelets against the real API server of this "
            "kubeconfig; its own control plane schedules, binds, collects and evicts "
            "(manual-scheduling, steady, fidelity; see docs/simulator.md)",
        )
        parser.add_argument("--context", help="with --attach: the kubeconfig context to use")
        parser.add_argument(
            "--k8s-version",
            metavar="X.Y",
            help="follow this Kubernetes release's shapes (kubelet texts and conditions, node "
            "grace period, PodGC, taint controller, scheduler texts; see docs/simulator.md); "
            f"default {NEWEST}, with --attach the API server's release",
        )
        parser.add_argument(
            "--node-fault",
            action="append",
            default=[],
            metavar="NODE:MODE[@SECONDS]",
            help="with --attach: at that second, hang (kubelet silent), stop (no heartbeats), "
            "die, resume, not-ready, memory-pressure or delete the node (repeatable)",
        )
        parser.add_argument(
            "--events-api",
            choices=("v1", "events.k8s.io/v1"),
            default="v1",
            help="which Event API the recording watches (default v1)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        _check_options(options)
        name = options["scenario"] or (None if options["file"] else "steady")
        try:
            scenario = find_scenario(name, options["file"])
        except (KeyError, OSError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        speed_text = options["speed"] or ("max" if options["record"] else "1")
        opts = Options(
            seed=options["seed"],
            duration=options["duration"],
            nodes=options["nodes"],
            pods=options["pods"],
            churn=options["churn"],
            file=options["file"],
        )
        # SIGTERM and SIGINT stop the run cleanly, so the recording is flushed and
        # closed. SIGINT is set explicitly: a process started from a script's
        # background job inherits SIGINT ignored, and Ctrl-C must still stop it.
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, _interrupt)
        if options["attach"]:
            self._attach(scenario, opts, options)
            return
        if options["context"] or options["node_fault"]:
            raise CommandError("--context and --node-fault need --attach")
        if options["k8s_version"]:
            try:
                kubelet_version(options["k8s_version"])
            except ValueError as exc:
                raise CommandError(f"--k8s-version: {exc}") from exc
            opts.k8s_version = options["k8s_version"]
        if options["serve"]:
            self._serve(scenario, opts, options, speed_text)
            return
        if options["faults"]:
            raise CommandError("--faults needs --serve: faults are injected into HTTP requests")
        if options["paused"]:
            raise CommandError(
                "--paused needs --serve: only a served cluster's clock can be resumed "
                "(POST /_sim/clock)"
            )
        cluster, stats = run(
            scenario,
            opts,
            record=options["record"],
            speed=parse_speed(speed_text),
            events_group=options["events_api"],
            progress=None if options["record"] else self._progress,
            reclaim=not self.exiting,
        )
        if self.exiting:
            self.cluster = cluster  # freed by the process's exit, not object by object
        self.stdout.write(stats.describe())
        if options["record"]:
            self.stdout.write(f"trace written to {options['record']}")
        sys.stdout.flush()

    def _progress(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()

    def _serve(self, scenario: Any, opts: Options, options: dict[str, Any], speed: str) -> None:
        speed_value = parse_speed(speed if options["speed"] else "1")
        if speed_value is None:
            raise CommandError("--serve needs a numeric --speed (virtual time follows the clock)")
        faults = None
        if options["faults"]:
            try:
                faults = load_faults(options["faults"])
            except (OSError, ValueError) as exc:
                raise CommandError(f"--faults: {exc}") from exc
        # Live: virtual time starts now, so ages in kubectl and the dashboard make sense
        # (with --paused they lag the wall clock by as long as the clock was held).
        # A scenario with a lead has run that long already: it ends at now.
        opts.start = float(int(time.time())) - scenario.lead
        try:
            server, recording, writer = serve(
                scenario,
                opts,
                options["serve"],
                speed=speed_value,
                kubeconfig=options["kubeconfig"],
                record=options["record"],
                events_group=options["events_api"],
                faults=faults,
                paused=options["paused"],
            )
        except OSError as exc:
            raise CommandError(f"cannot listen on {options['serve']}: {exc}") from exc
        kubeconfig = options["kubeconfig"]
        if kubeconfig is None:
            port = server.address.rpartition(":")[2]
            kubeconfig = server.write_kubeconfig(settings.RUN_DIR / f"sim-{port}.kubeconfig")
        self.stdout.write(f"serving {scenario.name} at {server.address}")
        self.stdout.write(f"kubeconfig: {kubeconfig}")
        if options["paused"]:
            self.stdout.write(
                "paused at virtual time 0; start the clock with: "
                f"curl -d '{{\"running\": true}}' {server.address}/_sim/clock"
            )
        sys.stdout.flush()
        try:
            while not server.stopping.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            server.stop()
            if options["kubeconfig"] is None:
                Path(kubeconfig).unlink(missing_ok=True)  # its own: gone with it
            with server.lock:
                recording.drain()
                if writer is not None:
                    writer.close()

    def _attach(self, scenario: Any, opts: Options, options: dict[str, Any]) -> None:
        # Imported here: the kubernetes client costs half a second of start-up that plain
        # simulator runs do not need.
        from handoff.attach.kube import AttachError
        from handoff.attach.run import attach

        for clash in ("serve", "record", "faults", "file"):
            if options[clash]:
                raise CommandError(
                    f"--{clash} does not go with --attach (record the real cluster with "
                    "manage.py record)"
                    if clash == "record"
                    else f"--{clash} does not go with --attach"
                )
        if options["speed"] not in (None, "1"):
            raise CommandError(
                "--attach runs at the wall clock's speed: the real control "
                "plane's timers cannot be sped up"
            )
        try:
            faults = [NodeFault.parse(text) for text in options["node_fault"]]
            attached = attach(
                scenario,
                opts,
                options["attach"],
                context=options["context"],
                k8s_version=options["k8s_version"],
                faults=faults,
            )
        except (AttachError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        nodes = ", ".join(attached.cluster.kubelets)
        self.stdout.write(f"attached {scenario.name} to {attached.remote.server}: nodes {nodes}")
        sys.stdout.flush()
        attached.start()
        try:
            while not attached.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            attached.stop()
        if attached.error is not None:
            raise CommandError(f"the attached run stopped: {attached.error}")


def _check_options(options: dict[str, Any]) -> None:
    """Out-of-range numbers and unwritable files, before anything is built or run."""
    at_least("--duration", options["duration"], 0.0, above=True)
    at_least("--nodes", options["nodes"], 1)
    at_least("--pods", options["pods"], 0)
    at_least("--churn", options["churn"], 0.0, above=True)
    if options["record"]:
        writable(options["record"], "--record")
    if options["serve"]:
        address(options["serve"], "--serve")
        if options["kubeconfig"]:  # else its own file under .run/, made when it listens
            writable(options["kubeconfig"], "--kubeconfig")


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt
