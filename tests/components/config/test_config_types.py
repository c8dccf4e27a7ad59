"""The single-field rules as pydantic types (components/config/types.py), and how the loader keeps
every valid sibling checked when one of them refuses a value (components/config/loader.py)."""

from __future__ import annotations

import re

import pytest
from pydantic import TypeAdapter, ValidationError

from components.config import ConfigError, load_stack_config
from components.config import types as t
from tests.conftest import DELETE, stack_config

P = "gke-grpo:"

# (type, a value it refuses, the start of what the user is told, a value it accepts)
REFUSED = [
    (t.ClusterName, "Grpo", "1-40 characters: lowercase letters", "grpo-dev"),
    (t.ClusterName, "g" * 41, "1-40 characters", "g" * 40),
    (t.Zone, "us-central1", "a GCP zone such as us-central1-b", "us-central1-b"),
    (t.ProjectId, "owner", "a GCP project id", "owner-project"),
    (t.ReservationName, "R1", "a reservation name", "r1"),
    (t.ReservationBlock, "block_1", "a reservation block name", "block-1"),
    (t.MaintenanceExclusionName, "-x", "lowercase letters, digits and hyphens, at most 63", "freeze"),
    (t.LustreInstanceId, "1abc", "1-63 characters: lowercase letters", "grpo-lustre"),
    (t.LustreFilesystem, "lustre_fs", "1-8 letters or digits", "lustrefs"),
    (t.BucketName, "google-data", "3-63 characters: lowercase letters, digits, hyphens", "grpo-data"),
    (t.BucketName, "a..b", "3-63 characters", "a.b"),
    (t.ExperimentName, "My Run", "1-63 characters: lowercase letters, digits, '-', '_' and '.'", "my-run"),
    (t.HubModelId, "Qwen2.5-7B", "a Hugging Face model id <org>/<name>", "Qwen/Qwen2.5-7B-Instruct"),
    (t.HubModelId, "Qwen/x.git", "a Hugging Face model id", "Qwen/x"),
    (t.HubRevision, "main", "a Hugging Face Hub commit sha", "a" * 40),
    (t.GkeVersion, "v1.33", "a GKE version or prefix", "1.33.5-gke.1308000"),
    (t.HelmChartVersion, "1.7", 'an exact chart version such as "1.7.0"', "1.7.0"),
    (t.HelmChartVersion, "1.5.1", "a kuberay-operator 1.6.x or 1.7.x chart", "1.7.0"),
    (t.HelmChartVersion, "1.6.0", "a chart version whose CRDs are vendored under data/kuberay-crds/", "1.7.0"),
    (t.PinnedImage, "rayproject/ray:latest", "a pinned image: it uses the floating tag 'latest'",
     "rayproject/ray:2.54.0"),
    (t.PinnedImage, "rayproject/ray", "a pinned image: it has no tag", "rayproject/ray@sha256:" + "0" * 64),
    (t.WindowTime, "2025-01-04 02:00", "an RFC 3339 UTC time such as 2025-01-04T02:00:00Z",
     "2025-01-04T02:00:00Z"),
    (t.WindowTime, "2025-13-04T02:00:00Z", r"a real RFC 3339 time \(month 01-12", "2025-12-04T02:00:00Z"),
    (t.ExclusionTime, "tomorrow", "an RFC 3339 UTC time such as 2026-12-01T00:00:00Z", "2026-12-24T00:00:00Z"),
    (t.Recurrence, "WEEKLY", "an RFC 5545 RRULE such as FREQ=WEEKLY;BYDAY=SA,SU", "FREQ=DAILY"),
    (t.Recurrence, "FREQ=WEEKLY;BYDAY=XX", r"an RFC 5545 RRULE such as FREQ=WEEKLY;BYDAY=SA,SU \(BYDAY=XX",
     "FREQ=WEEKLY;BYDAY=SA"),
    (t.SubnetCidr, "10.0.0.0/33", r"an IPv4 CIDR such as 10.0.0.0/20 \(", "10.0.0.0/20"),
    (t.SubnetCidr, "10.0.0.1/20", r"an IPv4 CIDR such as 10.0.0.0/20 \(10.0.0.1/20 has host bits set",
     "10.0.0.0/20"),
    (t.SubnetCidr, "8.8.8.0/24", r"a private \(RFC 1918\) range", "192.168.0.0/24"),
    (t.SubnetCidr, "10.0.0.0/30", "a prefix of /29 or larger", "10.0.0.0/29"),
    (t.LustrePeeringCidr, "10.96.0.0/26", "a prefix between /8 and /24", "10.96.0.0/20"),
    (t.LustrePeeringCidr, "not-a-cidr", "an IPv4 CIDR such as 10.0.0.0/20", "10.96.0.0/24"),
    (t.AuthorizedCidr, "0.0.0.0/0", "a range narrower than 0.0.0.0/0", "203.0.113.0/24"),
    (t.AuthorizedCidr, "office", r"an IPv4 CIDR such as 203.0.113.0/24 \(", "8.8.8.8/32"),
    (t.CpuQuantity, "8 cores", 'a Kubernetes quantity such as "8" or "500m"', "500m"),
    (t.Quantity, "32GB", 'a Kubernetes quantity such as "32Gi"', "32Gi"),
    (t.FiniteFloat, float("nan"), r"a finite number \(not .inf or .nan\)", 1e-6),
    (t.FiniteFloat, float("inf"), "a finite number", 0.5),
    (t.SoftDeleteRetentionDays, 3, r"0 \(soft delete off\) or 7-90 days", 7),
    (t.SoftDeleteRetentionDays, 91, "0 .soft delete off. or 7-90 days", 0),
    (t.MetadataCacheTtlSeconds, 0, "a positive TTL or -1 .never expire.", -1),
    (t.FlexStartRunSeconds, 8 * 24 * 3600, r"at most 604800 \(7 days, flex-start's limit\)", 604800),
    (t.LustreThroughputTier, 300, r"one of 125, 250, 500, 1000 \(MB/s per TiB\)", 1000),
    (t.ActiveDeadlineSeconds, 2**31, r"at most 2,147,483,647 \(the RayJob field is an int32\)", 2**31 - 1),
    (t.GpuNodes, 0, "at least 1: the number of GPU nodes the run uses", 1),
    (t.GpuNodes, 1001, "at most 1,000: GKE's limit of nodes per node pool zone", 1000),
    (t.MaxGpuNodes, 5000, "at most 1,000", 16),
    (t.RetiredPeeringPrefixLength, 20, "not used any more: the private-services range is "
     "network.lustrePeeringCidr", None),
]


@pytest.mark.parametrize("kind,bad,message,good", REFUSED,
                         ids=[f"{i}-{row[1]!r}"[:40] for i, row in enumerate(REFUSED)])
def test_each_type_refuses_with_the_rules_words_and_accepts_a_good_value(kind, bad, message, good):
    adapter = TypeAdapter(kind)
    with pytest.raises(ValidationError, match=message) as caught:
        adapter.validate_python(bad)
    (error,) = caught.value.errors()
    assert error["type"] == t.RULE_ERROR and re.match(message, error["msg"])
    if good is not None:
        assert adapter.validate_python(good) == good


def test_a_refused_value_is_accepted_as_given_only_when_the_loader_asks():
    adapter = TypeAdapter(t.ExperimentName)
    assert adapter.validate_python("My Run", context={t.ACCEPT_AS_GIVEN: True}) == "My Run"
    with pytest.raises(ValidationError, match="1-63 characters"):
        adapter.validate_python("My Run", context={t.ACCEPT_AS_GIVEN: False})


def test_bounds_pydantic_knows_are_in_the_json_schema_too():
    assert TypeAdapter(t.FlexStartRunSeconds).json_schema()["minimum"] == 600
    assert TypeAdapter(t.MetadataCacheTtlSeconds).json_schema()["minimum"] == -1
    assert TypeAdapter(t.ClusterName).json_schema() == {
        "type": "string", "pattern": "^[a-z]([-a-z0-9]*[a-z0-9])?$", "maxLength": 40}


# ---- the loader: a refused value never hides, nor invents, another problem -------------------

def problem_list(stack: str, changes: dict) -> list[tuple[str, str]]:
    raw, secrets = stack_config(stack, changes)
    with pytest.raises(ConfigError) as caught:
        load_stack_config(raw, secrets, stack)
    return [(p.key, p.allowed) for p in caught.value.problems]


def problems(stack: str, changes: dict) -> dict[str, str]:
    found = problem_list(stack, changes)
    assert len({key for key, _ in found}) == len(found), found     # one problem per key here
    return dict(found)


def test_a_refused_required_value_keeps_its_areas_other_rules_running():
    # experimentName and cluster.name are required: kept as given, so totalSteps/totalEpochs and
    # the zone's region are still checked in the same run.
    found = problems("dev", {P + "job.experimentName": "My Run", P + "job.totalSteps": 30,
                             P + "cluster.name": "Bad_Name", P + "cluster.zone": "europe-west4-a"})
    assert set(found) == {P + "job.experimentName", P + "job.totalSteps", P + "cluster.name",
                          P + "cluster.zone"}, found
    assert found[P + "cluster.zone"].startswith("a zone of the region gcp:region=")


def test_a_refused_optional_value_is_not_compared_with_its_default():
    # clusterSubnetCidr overlaps the *default* podCidr (10.4.0.0/14); the podCidr the user gave
    # is refused, so no overlap with a range nobody asked for is reported. The gVNIC range that
    # really overlaps an RDMA subnet still is.
    found = problems("dev", {P + "network.podCidr": "10.4.0.0/33", P + "network.clusterSubnetCidr": "10.4.0.0/20",
                             P + "network.gvnicSubnetCidr": "192.168.1.0/24"})
    assert set(found) == {P + "network.podCidr", P + "network.rdmaSubnetCidrs[0]"}, found


def test_a_refused_list_item_is_named_by_its_index_and_drops_its_list_only():
    found = problems("prod", {P + "network.rdmaSubnetCidrs": [f"192.168.{i}.0/24" for i in range(1, 8)]
                              + ["192.168.8.0/30"], P + "job.totalEpochs": 3})
    # No "exactly 8 CIDRs" about the default list, and the job's rule still runs.
    assert set(found) == {P + "network.rdmaSubnetCidrs[7]", P + "job.totalSteps"}, found
    assert found[P + "network.rdmaSubnetCidrs[7]"].startswith("a prefix of /29 or larger")


def test_a_rule_comparing_with_a_refused_key_is_not_reported():
    # controlPlaneAccess "public" is refused (and would default to "dns"): the networks are not
    # then reported as "only with authorizedNetworks".
    found = problems("dev", {P + "cluster.controlPlaneAccess": "public", P + "cluster.masterAuthorizedNetworks": [
        {"cidrBlock": "203.0.113.0/24", "displayName": "office"}]})
    assert set(found) == {P + "cluster.controlPlaneAccess"}, found
    # A refused startTime is not compared with the endTime the user gave.
    found = problems("dev", {P + "cluster.maintenanceWindow": {"startTime": "2025-01-04T25:00:00Z",
                                                              "endTime": "2025-01-04T01:00:00Z"}})
    assert set(found) == {P + "cluster.maintenanceWindow.startTime"}, found


def test_a_required_value_of_the_wrong_shape_still_drops_what_holds_it():
    # A reservation without a usable name is refused as a whole (the name is required), and the
    # "reservation required" rule about the missing object is not reported on top of it.
    found = problems("prod", {P + "gpu.reservation": {"name": 7}})
    assert set(found) == {P + "gpu.reservation.name"}, found
    found = problems("prod", {P + "gpu.reservation": {"name": "R 1"}, P + "gpu.nodes": 0})
    assert set(found) == {P + "gpu.reservation.name", P + "gpu.nodes"}, found


def test_a_count_kept_as_given_is_not_compared_with_its_bounds():
    # gpu.nodes 0 is refused but kept (required) so the other GPU rules run; "minNodes at most
    # gpu.nodes (0)" would be about a value the program never uses.
    found = problems("prod", {P + "gpu.nodes": 0, P + "gpu.minNodes": 1, P + "gpu.autoRepair": True,
                              P + "gpu.provisioningModel": "flex-start", P + "gpu.reservation": DELETE})
    assert set(found) == {P + "gpu.nodes", P + "gpu.autoRepair", P + "gpu.minNodes"}, found
    assert found[P + "gpu.minNodes"].startswith("0 (or omitted) with flex-start"), found


def test_an_area_that_cannot_parse_is_one_problem_and_nothing_else():
    found = problems("dev", {P + "cluster.zone": DELETE, P + "cluster.name": "Bad_Name"})
    assert set(found) == {P + "cluster.zone", P + "cluster.name"}, found


# ---- found by a fresh-eyes review: spurious, lost or unsafe problems ---------------------------

def test_a_refused_sidecar_limit_is_not_counted_as_its_default_against_the_worker():
    # The Autopilot default sidecar (8 CPU) would make worker.cpu 215 too large; the user's
    # sidecarCpuLimit was refused, so nothing about it is known.
    found = problems("dev", {P + "storage.gcs.sidecarCpuLimit": "2 cores", P + "storage.gcs.sidecarMemoryLimit": "4Gi",
                             P + "kuberay.worker.cpu": 215})
    assert set(found) == {P + "storage.gcs.sidecarCpuLimit"}, found
    found = problems("dev", {P + "storage.gcs.sidecarEphemeralStorageLimit": "510 Gi",
                             P + "kuberay.worker.ephemeralStorageGib": 11490})
    assert set(found) == {P + "storage.gcs.sidecarEphemeralStorageLimit"}, found


def test_rules_naming_what_they_compared_with_are_not_reported_about_refused_values():
    found = problems("prod", {P + "cluster.headPool.machineType": 5, P + "kuberay.head": {"cpu": 30, "memoryGib": 100}})
    assert set(found) == {P + "cluster.headPool.machineType"}, found
    found = problems("dev", {P + "job.totalEpochs": "2"})
    assert set(found) == {P + "job.totalEpochs"}, found


def test_a_problem_about_a_whole_object_stands_when_a_part_of_it_is_refused():
    found = problems("dev", {P + "gpu.reservation": {"name": "BAD"}})          # dev is Spot
    assert set(found) == {P + "gpu.reservation.name", P + "gpu.reservation"}, found
    assert found[P + "gpu.reservation"] == 'only with provisioningModel "reservation"'
    found = problems("prod", {P + "storage.gcs": {"bucketName": "BAD"}})       # prod is Lustre
    assert set(found) == {P + "storage.gcs.bucketName", P + "storage.gcs"}, found


@pytest.mark.parametrize("key,value", [
    ("cluster.name", "grpo\n"), ("cluster.zone", "us-central1-b\n"), ("kuberay.namespace", "grpo\n"),
    ("job.experimentName", "run\n"), ("cluster.minMasterVersion", "1.35\n"), ("job.modelRevision", "a" * 40 + "\n"),
])
def test_a_trailing_newline_is_refused(key, value):
    # `$` matches before a final newline: every pattern is applied with fullmatch.
    assert P + key in problems("dev", {P + key: value})


@pytest.mark.parametrize("changes", [
    {P + "storage.gcs.sidecarEphemeralStorageLimit": "1" * 400 + "Gi"},
    {P + "storage.gcs.sidecarMemoryLimit": "1" * 400 + "Gi"},
    {P + "storage.gcs.sidecarCpuLimit": "1" * 400},
    {P + "cluster.minMasterVersion": "9" * 5000 + ".35"},
    {P + "kuberay.helmChartVersion": "9" * 5000 + ".0.0"},
], ids=["ephemeral", "memory", "cpu", "gke-version", "chart-version"])
def test_overlong_numbers_are_a_clear_problem_not_a_traceback(changes):
    (key,) = changes
    found = problems("dev", changes)
    assert key in found and "Exceeds the limit" not in found[key], found


def test_an_area_that_json_or_python_cannot_hold_is_a_clear_problem():
    raw, secrets = stack_config("dev")
    huge = dict(raw, **{P + "gpu": '{"nodes": ' + "9" * 5000 + "}"})
    with pytest.raises(ConfigError, match=r"gke-grpo:gpu: given .*must be an object"):
        load_stack_config(huge, secrets, "dev")
    deep = dict(raw, **{P + "job": {"extraOverrides": _nested(5000)}})
    with pytest.raises(ConfigError, match=r"gke-grpo:job: .*nested too deeply"):
        load_stack_config(deep, secrets, "dev")


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def test_a_value_under_a_secret_key_is_not_echoed_inside_the_message_either():
    raw, secrets = stack_config("dev", {P + "network.podCidr": "10.4.0.1/14",
                                        P + "cluster.maintenanceWindow.recurrence": "FREQ=WEEKLY;BYDAY=hunter2secret"})
    with pytest.raises(ConfigError) as caught:
        load_stack_config(raw, secrets | {P + "network", P + "cluster"}, "dev")
    text = str(caught.value)
    assert "10.4.0.1" not in text and "hunter2secret" not in text, text
    assert P + "network.podCidr: given (value hidden); an IPv4 CIDR such as 10.0.0.0/20" in text, text
