"""``kubectl handoff pod NAME`` and ``kubectl handoff triage``: arguments as kubectl takes
them (flags before or after the command), one source (a Handoff server, or ``--local``),
one output. Every error is one line on stderr and exit status 1, as kubectl's are."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, NoReturn

from handoff.core.trace import format_time, parse_time
from handoff.kubectl import kubeconfig, output
from handoff.kubectl.errors import PluginError
from handoff.kubectl.remote import HandoffServer

PROG = "kubectl handoff"
EXAMPLES = """examples:
  kubectl handoff triage -A --server https://handoff.example.com --token "$TOKEN"
  kubectl handoff pod web-7d4b9c-x2x9z -n shop -o json      (HANDOFF_SERVER, HANDOFF_TOKEN set)
  kubectl handoff triage --local --context prod -o wide     (no Handoff server: watch 5 s)
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise PluginError(f"{message} (see {PROG} --help)")


def _options(parser: argparse.ArgumentParser, on_command: bool) -> None:
    """The flags every command takes. On a command they default to SUPPRESS, so a flag
    given before the command is not overwritten by the command's default."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if on_command else value

    add = parser.add_argument
    add("-n", "--namespace", default=default(None), help="namespace (default: the context's)")
    add(
        "-A",
        "--all-namespaces",
        action="store_true",
        default=default(False),
        help="every namespace",
    )
    add("-o", "--output", choices=("json", "wide"), default=default(None), help="json or wide")
    add(
        "--server",
        default=default(os.environ.get("HANDOFF_SERVER")),
        help="Handoff's URL (env HANDOFF_SERVER)",
    )
    add(
        "--token",
        default=default(os.environ.get("HANDOFF_TOKEN", "")),
        help="Handoff API token (env HANDOFF_TOKEN)",
    )
    add(
        "--cluster",
        default=default(None),
        help="which of the server's clusters (default: the only one, or the context's name)",
    )
    add(
        "--local",
        action="store_true",
        default=default(False),
        help="no server: watch the context yourself",
    )
    add(
        "--watch-seconds",
        type=float,
        default=default(5.0),
        help="--local: how long to watch (default 5)",
    )
    add(
        "--stuck-after",
        type=float,
        default=default(60.0),
        help="--local: seconds after the bind before a pod is stuck (default 60)",
    )
    add("--context", default=default(None), help="kubeconfig context (default: the current one)")
    add(
        "--kubeconfig",
        default=default(None),
        help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)",
    )


def parser() -> argparse.ArgumentParser:
    main = _Parser(
        prog=PROG,
        description="Where each pod's node handoff stopped, and what to do: Handoff in kubectl.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _options(main, on_command=False)
    common = argparse.ArgumentParser(add_help=False)
    _options(common, on_command=True)
    commands = main.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    pod = commands.add_parser(
        "pod", parents=[common], help="one pod: timeline, verdict, reason, remedy"
    )
    pod.add_argument("name", help="the pod's name")
    pod.add_argument("--uid", help="this pod of that name (default: the most recent)")
    commands.add_parser(
        "triage", parents=[common], help="every pod, worst first: the board as a table"
    )
    return main


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        return run(args)
    except PluginError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def run(args: argparse.Namespace) -> int:
    if args.command is None:
        raise PluginError(f"say what to show: {PROG} pod NAME, or {PROG} triage (see --help)")
    if args.local and args.server:
        raise PluginError("--local watches the cluster itself: drop --server (or HANDOFF_SERVER)")
    if not args.local and not args.server:
        raise PluginError(
            "say where Handoff is (--server URL, or HANDOFF_SERVER),"
            " or watch the cluster yourself with --local"
        )
    if args.command == "pod":
        if args.all_namespaces:
            raise PluginError("a pod is in one namespace: use -n, not -A")
        return _pod(args)
    return _triage(args)


def _triage(args: argparse.Namespace) -> int:
    namespace = None if args.all_namespaces else _namespace(args)
    cluster, now, views = (
        _local_pods(args, namespace) if args.local else _server_pods(args, namespace)
    )
    if args.output == "json":
        sys.stdout.write(output.as_json({"cluster": cluster, "evaluated_at": now, "pods": views}))
    elif not views:
        where = f" in {namespace} namespace" if namespace else ""
        print(f"No pods found{where}.", file=sys.stderr)
    else:
        sys.stdout.write(output.table(views, now, namespace is None, args.output == "wide"))
    return 0


def _pod(args: argparse.Namespace) -> int:
    namespace = _namespace(args)
    if args.local:
        cluster, now, views = _local_pods(args, namespace)
        view = _newest(views, args.name, args.uid)
        if view is None:
            raise PluginError(
                f'pod "{args.name}" not seen in namespace {namespace} of context {cluster!r}'
                f" (watched {args.watch_seconds:g} s)"
            )
    else:
        server = HandoffServer(args.server, args.token)
        cluster = server.cluster(args.cluster, args.context or _context_name(args))
        view = server.pod(cluster, namespace, args.name, args.uid)
        now = format_time(time.time())
    if args.output == "json":
        sys.stdout.write(output.as_json(view))
    else:
        sys.stdout.write(output.describe(view, cluster, now))
    return 0


def _namespace(args: argparse.Namespace) -> str:
    if args.namespace:
        return args.namespace
    if args.local:
        return kubeconfig.resolve(args.kubeconfig, args.context).namespace
    return kubeconfig.namespace_only(args.kubeconfig, args.context)


def _context_name(args: argparse.Namespace) -> str | None:
    try:
        return kubeconfig.resolve(args.kubeconfig, args.context).name
    except PluginError:
        return None


def _server_pods(
    args: argparse.Namespace, namespace: str | None
) -> tuple[str, str | None, list[dict[str, Any]]]:
    server = HandoffServer(args.server, args.token)
    cluster = server.cluster(args.cluster, args.context or _context_name(args))
    views, evaluated = server.pods(cluster, namespace)
    return cluster, evaluated, views


def _local_pods(
    args: argparse.Namespace, namespace: str | None
) -> tuple[str, str | None, list[dict[str, Any]]]:
    # Imported here: the kubernetes client and the fold take seconds to import, which
    # --server does not need.
    from handoff.core.report import build_report
    from handoff.kubectl import local

    if args.watch_seconds <= 0:
        raise PluginError("--watch-seconds must be more than 0")
    context = kubeconfig.resolve(args.kubeconfig, args.context)
    watched = local.watch(context, args.watch_seconds)
    for resource, problem in sorted(watched.problems.items()):
        print(
            f"warning: {resource} not watched ({problem}): verdicts that need them may be missing",
            file=sys.stderr,
        )
    report = build_report(watched.timeline, at=time.time(), stuck_after=args.stuck_after)
    views = [view for view in report["pods"] if namespace is None or view["namespace"] == namespace]
    return context.name, report["evaluated_at"], views


def _newest(views: list[dict[str, Any]], name: str, uid: str | None) -> dict[str, Any] | None:
    """The pod of that name with ``uid``, or the most recently created one (as the API)."""
    same = [view for view in views if view["name"] == name and (uid is None or view["uid"] == uid)]

    def created(view: dict[str, Any]) -> float:
        stamp = view["milestones"]["created"]
        return parse_time(stamp) if stamp else 0.0

    return max(same, key=created, default=None)
