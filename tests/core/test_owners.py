"""Workloads that create no pods and owners whose pods loop (issue 17 items 3 and 4), on
streams shaped as upstream shapes them:

* pkg/controller/controller_utils.go ``RealPodControl.CreatePods`` (ReplicaSet, Job,
  DaemonSet): ``FailedCreate`` Warning "Error creating: <API error>", ``SuccessfulCreate``
  "Created pod: <name>";
* pkg/controller/statefulset/stateful_pod_control.go ``recordPodEvent``: "create Pod <pod>
  in StatefulSet <set> failed error: <API error>";
* client-go tools/events (events.k8s.io/v1: ``regarding``, ``note``, ``series``);
* the API errors: plugin/pkg/admission/resourcequota ("exceeded quota"),
  staging/src/k8s.io/pod-security-admission ("violates PodSecurity", 1.25 GA),
  apiserver/pkg/admission/plugin/webhook/errors ("admission webhook ... denied the
  request"; "failed calling webhook ... context deadline exceeded");
* pkg/controller/deployment/sync.go: ReplicaSet ``<deployment>-<pod-template-hash>``;
* pkg/controller/podgc/gc_controller.go gcOrphaned: a pod bound to a node that does not
  exist is deleted (the fold's ``podgc-deleted orphaned``).
"""

from __future__ import annotations

from typing import Any

import orjson

from handoff.core.owners import LOOP_WINDOW, cause
from handoff.core.report import build_report
from handoff.core.snapshot import dump_state, load_state
from handoff.interop.exporters.tables import render_table
from tests.core.k8sshapes import T0, Script, failed_status, micro, node, pod, second
from tests.core.ownershapes import (
    POD_SECURITY,
    QUOTA,
    WEBHOOK_DENIED,
    WEBHOOK_TIMEOUT,
    deployment_pod,
    owner_event,
    pinned_deployment,
    series_event,
)


def _failing(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["key"]: f for f in report["owners"]["failing"]}


def test_quota_failures_on_a_replicaset_are_one_owner_row_under_its_deployment():
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    script.add(5, "ADDED", deployment_pod("web-5d8f7c9b6-a1b2c", "u-a", 5))
    script.add(
        20,
        "ADDED",
        owner_event("ReplicaSet", "web-5d8f7c9b6", "FailedCreate", QUOTA.format("x1"), 20),
    )
    script.add(
        60,
        "MODIFIED",
        owner_event(
            "ReplicaSet", "web-5d8f7c9b6", "FailedCreate", QUOTA.format("x7"), 60, count=7, first=20
        ),
    )

    report = script.report(at=70)
    failure = _failing(report)["ReplicaSet/default/web-5d8f7c9b6"]

    assert failure["cause"] == "quota"
    assert failure["workload"] == {"kind": "Deployment", "name": "web"}
    assert (failure["count"], failure["first"], failure["last"]) == (
        7,
        micro(20)[:19] + ".000000Z",
        micro(60)[:19] + ".000000Z",
    )
    assert "exceeded quota" in failure["message"]
    assert failure["resolved"] is None
    assert "ResourceQuota" in failure["explanation"]
    pod_view = next(p for p in report["pods"] if p["name"] == "web-5d8f7c9b6-a1b2c")
    assert pod_view["owner"]["workload"] == {"kind": "Deployment", "name": "web"}
    table = render_table(report)
    assert "WORKLOADS CREATING NO PODS" in table
    assert "ReplicaSet default/web-5d8f7c9b6 (Deployment web): FailedCreate quota, 7x" in table


def test_both_event_groups_are_read_and_each_cause_named():
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    script.add(10, "ADDED", series_event("StatefulSet", "db", "FailedCreate", POD_SECURITY, 10, 4))
    script.add(11, "ADDED", owner_event("Job", "nightly", "FailedCreate", WEBHOOK_TIMEOUT, 11))
    script.add(12, "ADDED", owner_event("DaemonSet", "agent", "FailedCreate", WEBHOOK_DENIED, 12))

    failing = _failing(script.report(at=20))

    assert failing["StatefulSet/default/db"]["cause"] == "pod-security"
    assert failing["StatefulSet/default/db"]["count"] == 4
    assert failing["StatefulSet/default/db"]["source"] == "statefulset-controller"
    assert failing["Job/default/nightly"]["cause"] == "webhook-unreachable"
    assert failing["DaemonSet/default/agent"]["cause"] == "webhook-denied"
    assert failing["DaemonSet/default/agent"]["workload"] is None


def test_the_other_causes_read_from_the_api_error():
    assert (
        cause(
            'pods "x" is forbidden: [minimum cpu usage per Container is 100m, but request is 50m]'
        )
        == "limit-range"
    )
    assert (
        cause("unable to create new content in namespace team because it is being terminated")
        == "namespace-terminating"
    )
    assert (
        cause('error looking up service account team/builder: serviceaccount "builder" not found')
        == "service-account"
    )
    assert (
        cause(
            'Post "https://hook": net/http: request canceled (Client.Timeout exceeded'
            " while awaiting headers)"
        )
        == "webhook-unreachable"
    )
    assert cause("something new") == "other"


def test_a_failure_resolves_when_the_controller_creates_again():
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    script.add(10, "ADDED", owner_event("ReplicaSet", "api-7c9", "FailedCreate", QUOTA, 10))
    script.add(10.5, "ADDED", owner_event("Job", "batch", "FailedCreate", QUOTA, 10))
    script.add(
        40,
        "ADDED",
        owner_event("ReplicaSet", "api-7c9", "SuccessfulCreate", "Created pod: api-7c9-q2w3e", 40),
    )
    # The Job's new pod is seen, its SuccessfulCreate event is not (lost, or not watched).
    script.add(50, "ADDED", pod("batch-zx81k", "u-batch", 50, owner=("Job", "batch")))

    report = script.report(at=60)
    failing = _failing(report)

    assert failing["ReplicaSet/default/api-7c9"]["resolved"] == micro(40)[:19] + ".000000Z"
    assert failing["Job/default/batch"]["resolved"] == micro(50)[:19] + ".000000Z"
    assert "WORKLOADS CREATING NO PODS" not in render_table(report)


def test_what_is_not_a_creation_failure_or_points_at_nothing_known_does_no_harm():
    """Job BackoffLimitExceeded (job_controller.go): the pods were created and failed.
    Events about kinds Handoff does not fold, about owners never seen, without a name."""
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    script.add(
        10,
        "ADDED",
        owner_event(
            "Job",
            "nightly",
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
            10,
        ),
    )
    script.add(
        11,
        "ADDED",
        owner_event(
            "HorizontalPodAutoscaler", "web", "SuccessfulRescale", "New size: 3; reason: cpu", 11
        ),
    )
    nameless = owner_event("ReplicaSet", "x", "FailedCreate", QUOTA, 12)
    nameless["involvedObject"]["name"] = ""
    script.add(12, "ADDED", nameless)

    report = script.report(at=20)

    assert report["owners"] == {"failing": [], "loops": []}
    assert report["skipped"]["Event about HorizontalPodAutoscaler"] == 1


def test_an_older_repeat_after_a_relist_does_not_go_back_in_time():
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    script.add(60, "ADDED", owner_event("ReplicaSet", "api-7c9", "FailedCreate", QUOTA, 60, 5, 10))
    script.add(61, "ADDED", owner_event("ReplicaSet", "api-7c9", "FailedCreate", QUOTA, 30, 3, 10))

    failure = _failing(script.report(at=70))["ReplicaSet/default/api-7c9"]

    assert failure["count"] == 5


def test_a_failure_not_repeated_for_an_hour_says_the_streams_cannot_tell_why():
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    script.add(10, "ADDED", owner_event("ReplicaSet", "old-7c9", "FailedCreate", QUOTA, 10))

    failure = _failing(script.report(at=10 + 3700))["ReplicaSet/default/old-7c9"]

    assert failure["stale"] is True
    assert "cannot tell" in failure["explanation"]


def test_a_deployment_pinned_to_a_missing_node_is_one_loop_with_a_count_and_a_rate():
    report = pinned_deployment(6).report(at=10 + 6 * 60)

    (loop,) = report["owners"]["loops"]
    assert loop["owner"] == {"kind": "Deployment", "namespace": "default", "name": "web"}
    assert (loop["verdict"], loop["reason"], loop["count"]) == ("podgc-deleted", "orphaned", 6)
    assert (loop["every_seconds"], loop["per_hour"]) == (60.0, 60.0)
    assert loop["pods"][0] == "web-5d8f7c9b6-p5"
    assert loop["summary"] == "6 pods podgc-deleted (orphaned), one every 60s"
    assert "Deployment default/web: 6 pods podgc-deleted" in render_table(report)


def test_two_endings_are_no_loop_and_old_endings_fall_out_of_the_window():
    assert pinned_deployment(2).report(at=200)["owners"]["loops"] == []
    spread = pinned_deployment(4, every=LOOP_WINDOW / 3 + 1)
    (loop,) = spread.report(at=4 * LOOP_WINDOW)["owners"]["loops"]
    assert loop["count"] == 3  # the first is more than the window before the newest


def test_a_daemonset_rejected_at_admission_again_and_again_is_a_loop():
    """kubelet lifecycle/predicate.go (1.26+ "Pod was rejected: " prefix): the DaemonSet
    controller deletes the Failed pod and creates another (daemon_controller.go
    FailedDaemonPod)."""
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    for i in range(4):
        t = 10 + i * 5
        name, uid = f"agent-{i}", f"u-agent-{i}"
        owner = ("DaemonSet", "agent")
        script.add(t, "ADDED", pod(name, uid, t, "worker-1", owner=owner))
        refused = failed_status(
            t + 1,
            "OutOfcpu",
            "Pod was rejected: Node didn't have enough"
            " resource: cpu, requested: 500, used: 3800, capacity: 4000",
        )
        script.add(t + 1, "MODIFIED", pod(name, uid, t, "worker-1", refused, owner=owner))

    (loop,) = script.report(at=40)["owners"]["loops"]

    assert (loop["owner"]["kind"], loop["verdict"], loop["reason"]) == (
        "DaemonSet",
        "rejected",
        "OutOfcpu",
    )
    assert loop["count"] == 4
    assert loop["every_seconds"] == 5.0


def test_bare_pods_and_a_replicaset_without_the_hash_label_are_not_misattributed():
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    for i in range(3):
        t = 10 + i * 60
        bare = pod(f"job-{i}", f"u-b{i}", t, "worker-9", owner=None)
        script.add(t, "ADDED", bare)
        script.add(t + 41, "DELETED", bare)
    script.add(5, "ADDED", pod("hand-abc12", "u-h", 5, "worker-1", owner=("ReplicaSet", "hand")))

    report = script.report(at=300)

    assert report["owners"]["loops"] == []
    view = next(p for p in report["pods"] if p["name"] == "hand-abc12")
    assert view["owner"] == {"kind": "ReplicaSet", "name": "hand"}


def test_the_owners_survive_a_snapshot():
    script = pinned_deployment(3)
    script.add(300, "ADDED", owner_event("ReplicaSet", "web-5d8f7c9b6", "FailedCreate", QUOTA, 300))
    timeline = script.fold()
    for pod_state in timeline.pods.values():  # as the live fold notes them at a flush
        judged = timeline.judge(pod_state, T0 + 310)
        timeline.owners.note_ending(pod_state, judged.verdict, judged.reason)

    restored = load_state(dump_state(timeline)).owners

    assert [f["key"] for f in restored.failing(T0 + 310)] == ["ReplicaSet/default/web-5d8f7c9b6"]
    assert restored.failing(T0 + 310)[0]["workload"]["name"] == "web"
    assert restored.loops(T0 + 310)[0]["count"] == 3


def test_a_report_changes_nothing_in_the_timeline_it_reads():
    """A replay's timeline is shared between requests: judging it for a report notes no
    endings in it (the report has its own copy of the owners)."""
    timeline = pinned_deployment(3).fold()

    assert build_report(timeline, at=T0 + 310)["owners"]["loops"][0]["count"] == 3
    assert timeline.owners.endings == {}
    assert timeline.owners.dirty == set()


def test_kubectl_get_events_output_gives_the_owner_rows(tmp_path):
    """What an operator already has: ``kubectl get events -A -o json`` (a v1 List of
    core/v1 Events, kubectl's printers), folded by the importers without a Pod in it."""
    from handoff.offline.triage import fold_trace

    items = [
        owner_event("ReplicaSet", "web-5d8f7c9b6", "FailedCreate", QUOTA.format("x1"), 20),
        owner_event("Job", "nightly", "FailedCreate", WEBHOOK_TIMEOUT, 25),
    ]
    path = tmp_path / "events.json"
    path.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}))

    report = fold_trace(path)

    assert [(f["owner"]["kind"], f["cause"]) for f in report["owners"]["failing"]] == [
        ("Job", "webhook-unreachable"),
        ("ReplicaSet", "quota"),
    ]
    assert report["pods"] == []


def test_a_relisted_failure_keeps_its_resolution_and_a_new_one_reopens_it():
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    script.add(10, "ADDED", owner_event("ReplicaSet", "api-7c9", "FailedCreate", QUOTA, 10))
    script.add(20, "ADDED", pod("api-7c9-q2w3e", "u-q", 20, owner=("ReplicaSet", "api-7c9")))
    # A relist (a 410, a restarted watch) sends the same Event again.
    script.add(30, "ADDED", owner_event("ReplicaSet", "api-7c9", "FailedCreate", QUOTA, 10))

    assert _failing(script.report(at=40))["ReplicaSet/default/api-7c9"]["resolved"] is not None

    script.add(50, "MODIFIED", owner_event("ReplicaSet", "api-7c9", "FailedCreate", QUOTA, 50, 2))
    again = _failing(script.report(at=60))["ReplicaSet/default/api-7c9"]
    assert again["resolved"] is None
    assert again["count"] == 2


def test_a_jobs_failed_pods_loop_at_the_pace_they_failed_not_when_they_were_cleaned_up():
    """The Job controller (job_controller.go) makes a pod per retry up to backoffLimit; its
    failed pods stay until the Job goes (or ttlSecondsAfterFinished), then all at once."""
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    owner = ("Job", "nightly")
    finals = []
    for i in range(3):
        t = 10 + i * 20
        name, uid = f"nightly-{i}", f"u-n{i}"
        script.add(t, "ADDED", pod(name, uid, t, "worker-1", owner=owner))
        exited = {
            "reason": "Error",
            "exitCode": 1,
            "startedAt": second(t + 1),
            "finishedAt": second(t + 5),
        }
        done = failed_status(t + 1, "", "", containerStatuses=[{"state": {"terminated": exited}}])
        final = pod(name, uid, t, "worker-1", done, owner=owner)
        script.add(t + 5, "MODIFIED", final)
        finals.append(final)
    for i, final in enumerate(finals):
        script.add(500 + i * 0.1, "DELETED", final)  # the object as last stored

    (loop,) = script.report(at=600)["owners"]["loops"]

    assert (loop["owner"]["kind"], loop["verdict"], loop["reason"]) == ("Job", "failed", "Error")
    assert loop["count"] == 3
    assert loop["every_seconds"] == 20.0


def test_an_owner_recreated_under_the_same_name_starts_a_failure_of_its_own():
    """A StatefulSet deleted and created again keeps its name, not its uid: the new one's
    failure is not the old one's (first time, resolution)."""
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    script.add(10, "ADDED", owner_event("StatefulSet", "db", "FailedCreate", POD_SECURITY, 10))
    script.add(20, "ADDED", pod("db-0", "u-db0", 20, owner=("StatefulSet", "db")))
    again = owner_event("StatefulSet", "db", "FailedCreate", POD_SECURITY, 100)
    again["involvedObject"]["uid"] = "uid-db-second"
    again["metadata"]["name"] = "db.second"
    script.add(100, "ADDED", again)

    failure = _failing(script.report(at=110))["StatefulSet/default/db"]

    assert failure["resolved"] is None
    assert failure["first"] == failure["last"]


def test_a_deployment_that_cannot_make_its_replicaset_and_a_cronjob_its_jobs():
    """deployment/sync.go getNewReplicaSet (a quota on ReplicaSets); the CronJob controller
    (cronjob_controllerv2.go) refused by a webhook; then the Deployment scales a ReplicaSet."""
    rs_quota = (
        'Failed to create new replica set "web-5d8f7c9b6": replicasets.apps "web-5d8f7c9b6"'
        " is forbidden: exceeded quota: objects, requested: count/replicasets.apps=1,"
        " used: count/replicasets.apps=10, limited: count/replicasets.apps=10"
    )
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    script.add(10, "ADDED", owner_event("Deployment", "web", "ReplicaSetCreateError", rs_quota, 10))
    job = "Error creating job: " + WEBHOOK_DENIED.removeprefix("Error creating: ")
    script.add(11, "ADDED", owner_event("CronJob", "backup", "FailedCreate", job, 11))

    failing = _failing(script.report(at=20))
    assert failing["Deployment/default/web"]["cause"] == "quota"
    assert failing["CronJob/default/backup"]["cause"] == "webhook-denied"

    scaled = "Scaled up replica set web-5d8f7c9b6 to 3"
    script.add(30, "ADDED", owner_event("Deployment", "web", "ScalingReplicaSet", scaled, 30))
    assert _failing(script.report(at=40))["Deployment/default/web"]["resolved"] is not None
