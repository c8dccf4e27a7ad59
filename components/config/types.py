"""Single-field rules as pydantic types: a value is checked where its field is declared, and a
bad one is reported by pydantic with the same words the hand-written rule used.

A rule here raises ``PydanticCustomError(RULE_ERROR, ...)``; components/config/loader.py prints
its message as it is. A field that fails one is dropped from its area and the area parsed again
(an optional field takes its default; a required one is kept as given, see ``accepts_as_given``),
so the rules spanning several keys (components/config/rules.py) still run on every valid sibling
and a user sees every problem at once. The rules that stay hand-written read more than one key
(overlaps, counts per GPU type, Autopilot or Standard, version gates) or a value derived from one
(the default bucket name, derived resource names).
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationInfo, WithJsonSchema
from pydantic_core import PydanticCustomError

from components.config.facts import (
    FLEX_START_MAX_RUN_SECONDS,
    KUBERAY_CRD_DIR,
    LUSTRE_TIERS,
    SUPPORTED_KUBERAY_CHARTS,
)
from components.config.limits import load_config_limits
from components.config.patterns import (
    _BUCKET,
    _CPU_QUANTITY,
    _DNS1123_LABEL,
    _GKE_VERSION,
    _LUSTRE_FILESYSTEM,
    _PROJECT_ID,
    _QUANTITY,
    _RFC1035,
    _RFC3339,
    _ZONE,
)
from components.config.timeformats import rfc3339, rrule_problem
from components.kuberay_crds import vendored_chart_versions
from components.versions import image_reference_problem

# The error type of every rule here: its message is what the user sees, unchanged.
RULE_ERROR = "gke_grpo_rule"
# Validation context key (loader._parse_area): a rule accepts any value while the loader re-parses
# an area whose required field failed a rule, so that its valid siblings are still checked.
ACCEPT_AS_GIVEN = "accept_as_given"
_HUB_REVISION = r"^[0-9a-f]{40}$"


def accepts_as_given(info: ValidationInfo) -> bool:
    return bool(info.context and info.context.get(ACCEPT_AS_GIVEN))


def _why(problem: Callable[[Any], str | None]) -> AfterValidator:
    """A rule as a validator: ``problem(value)`` says what is allowed, or None when it is."""
    def check(value: Any, info: ValidationInfo) -> Any:
        if accepts_as_given(info):
            return value
        allowed = problem(value)
        if allowed is not None:
            # The message is a template for pydantic: a literal brace would be a placeholder.
            raise PydanticCustomError(RULE_ERROR, allowed.replace("{", "{{").replace("}", "}}"))
        return value
    return AfterValidator(check)


def credential_problem(value: Any) -> str | None:
    """Every free-text value of the stack config (a string, or a list's strings) refuses a
    credential: the rule is the run plan's (jobs/contract/credentials.py secret_value_kind). A
    plain config value is stored in the stack's state and printed by the preview; a credential
    belongs in a secret key. The message names the kind, never the value."""
    from jobs.contract.credentials import secret_value_kind

    for item in value if isinstance(value, (list, tuple)) else (value,):
        kind = secret_value_kind(item) if isinstance(item, str) else None
        if kind is not None:
            return (f"holds what looks like {kind}: a plain config value is stored in the stack's "
                    "state and shown by the preview; a credential goes only in gke-grpo:hfToken or "
                    "gke-grpo:wandbApiKey (pulumi config set --secret ...)")
    return None


def refuse_credentials(value: Any, info: ValidationInfo) -> Any:
    """``credential_problem`` as a validator of any field (models/base.py applies it to all)."""
    problem = None if accepts_as_given(info) else credential_problem(value)
    if problem is not None:
        raise PydanticCustomError(RULE_ERROR, problem.replace("{", "{{").replace("}", "}}"))
    return value


def _rule(accepts: Callable[[Any], bool], allowed: str) -> AfterValidator:
    return _why(lambda value: None if accepts(value) else allowed)


def _schema(pattern: str, max_length: int | None = None) -> WithJsonSchema:
    # The same rule for editors (docs/stack-config.schema.json); validation stays the rule's.
    schema = {"type": "string", "pattern": pattern}
    return WithJsonSchema(schema if max_length is None else {**schema, "maxLength": max_length})


def _name(pattern: re.Pattern, max_length: int, allowed: str) -> AfterValidator:
    return _rule(lambda v: bool(pattern.fullmatch(v)) and len(v) <= max_length, allowed)


# ---- names ----------------------------------------------------------------------------------

KubernetesNamespace = Annotated[str, _name(
    _DNS1123_LABEL, 63,
    "a Kubernetes namespace name: lowercase letters, digits and hyphens, at most 63 characters"),
    _schema(_DNS1123_LABEL.pattern, 63)]

RayClusterName = Annotated[str, _name(
    _RFC1035, 40,
    "lowercase letters, digits and hyphens, starting with a letter, at most 40 characters "
    "(KubeRay derives service names from it)"), _schema(_RFC1035.pattern, 40)]

# Every GCP name derives from it; that the derived names stay within 63 characters is a rule
# (rules.py: ResourceNames builds them).
ClusterName = Annotated[str, _name(
    _RFC1035, 40, "1-40 characters: lowercase letters, digits and hyphens, starting with a letter "
    "and not ending with a hyphen"), _schema(_RFC1035.pattern, 40)]

# That the zone lies in gcp:region is a rule (rules.py).
Zone = Annotated[str, _rule(lambda v: bool(_ZONE.fullmatch(v)), "a GCP zone such as us-central1-b"),
                 _schema(_ZONE.pattern)]

ProjectId = Annotated[str, _rule(lambda v: bool(_PROJECT_ID.fullmatch(v)), "a GCP project id"),
                      _schema(_PROJECT_ID.pattern)]

ReservationName = Annotated[str, _name(
    _RFC1035, 63, "a reservation name: lowercase letters, digits and hyphens, at most 63 characters"),
    _schema(_RFC1035.pattern, 63)]

ReservationBlock = Annotated[str, _name(
    _RFC1035, 63, "a reservation block name: lowercase letters, digits and hyphens, at most 63 "
    "characters"), _schema(_RFC1035.pattern, 63)]

# GKE node pool names: RFC 1035, at most 40 characters (gcloud container node-pools create NAME).
NodePoolName = Annotated[str, _name(
    _RFC1035, 40, "a node pool name: lowercase letters, digits and hyphens, at most 40 characters"),
    _schema(_RFC1035.pattern, 40)]

MaintenanceExclusionName = Annotated[str, _name(
    _RFC1035, 63, "lowercase letters, digits and hyphens, at most 63 characters"),
    _schema(_RFC1035.pattern, 63)]

LustreInstanceId = Annotated[str, _name(
    _RFC1035, 63, "1-63 characters: lowercase letters, digits and hyphens, starting with a letter"),
    _schema(_RFC1035.pattern, 63)]

LustreFilesystem = Annotated[str, _rule(
    lambda v: bool(_LUSTRE_FILESYSTEM.fullmatch(v)),
    "1-8 letters or digits, starting with a letter (a Lustre fsname)"),
    _schema(_LUSTRE_FILESYSTEM.pattern)]


def bucket_name_problem(name: str) -> str | None:
    if _BUCKET.fullmatch(name) and not name.startswith("goog") and "google" not in name and ".." not in name:
        return None
    return BUCKET_NAME_RULE


BUCKET_NAME_RULE = ("3-63 characters: lowercase letters, digits, hyphens, underscores and dots, "
                    "starting and ending with a letter or digit, not starting with \"goog\" nor "
                    "containing \"google\"")
BucketName = Annotated[str, _why(bucket_name_problem), _schema(_BUCKET.pattern, 63)]

# A row id of data/versions.yaml: the framework, then its version (verl-0.9.1, nemo-rl-0.7.0).
# That the row exists and is for job.framework is a rule (rules.py): it reads the table.
_RELEASE = re.compile(r"^[a-z][a-z-]*-[0-9]+(\.[0-9]+)*$")
ReleaseId = Annotated[str, _rule(
    lambda v: bool(_RELEASE.fullmatch(v)), "a row id of data/versions.yaml: the framework and its "
    "version, such as verl-0.9.1 or nemo-rl-0.7.0"), _schema(_RELEASE.pattern)]

_EXPERIMENT_NAME = re.compile(r"^[a-z0-9][-a-z0-9_.]{0,62}$")
ExperimentName = Annotated[str, _rule(
    lambda v: bool(_EXPERIMENT_NAME.fullmatch(v)), "1-63 characters: lowercase letters, digits, '-', "
    "'_' and '.' (it names checkpoint directories)"), _schema(_EXPERIMENT_NAME.pattern)]

# Hugging Face repo ids: huggingface_hub's validate_repo_id (huggingface_hub/utils/_validators.py,
# 1.33.0 as installed, read 2026-12-01): "[\w\-.]+" names, at most one "/", no "--" or "..",
# not starting or ending with "-" or ".", at most 96 characters. We also require the org: the
# model is staged under /data/models/<org>/<name> (jobs/contract/layout.py).
_HF_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?"
_HF_REPO_ID = re.compile(rf"^{_HF_NAME}/{_HF_NAME}$")
HF_REPO_ID_MAX = 96
HubModelId = Annotated[str, _rule(
    lambda v: len(v) <= HF_REPO_ID_MAX and bool(_HF_REPO_ID.fullmatch(v)) and "--" not in v
    and ".." not in v and not v.endswith(".git"),
    "a Hugging Face model id <org>/<name> (letters, digits, '-', '_' and '.'; no '..', '--' or "
    ".git; at most 96 characters), such as Qwen/Qwen2.5-7B-Instruct"),
    _schema(_HF_REPO_ID.pattern, HF_REPO_ID_MAX)]

# gke-grpo:job.evaluate (jobs/plan/after_training.py EVALUATE_MODES).
_EVALUATE_MODE = r"^(none|final|every-[1-9][0-9]{0,5})$"
EvaluateMode = Annotated[str, _rule(
    lambda v: bool(re.fullmatch(_EVALUATE_MODE, v)),
    "none, final, or every-K with K a whole number >= 1 (every K-th checkpoint, e.g. every-2)"),
    _schema(_EVALUATE_MODE)]

HubRevision = Annotated[str, _rule(
    lambda v: bool(re.fullmatch(_HUB_REVISION, v)),
    "a Hugging Face Hub commit sha: 40 lower-case hex characters (the model or dataset page, "
    "'Files and versions', History)"), _schema(_HUB_REVISION)]

# ---- versions and images ----------------------------------------------------------------------

# The minimum minor (data/gke-version-gates.yaml) stays a rule: the other version gates report
# on the same key and would be hidden by it.
GkeVersion = Annotated[str, _rule(
    lambda v: bool(_GKE_VERSION.fullmatch(v)),
    'a GKE version or prefix such as "1.33" or "1.33.5-gke.1308000"'), _schema(_GKE_VERSION.pattern)]

_CHART_VERSION = re.compile(r"^\d{1,4}\.\d{1,4}\.\d{1,4}$")


def _chart_version_problem(version: str) -> str | None:
    parts = tuple(int(p) for p in version.split("."))
    if not SUPPORTED_KUBERAY_CHARTS[0] <= parts < SUPPORTED_KUBERAY_CHARTS[1]:
        return ("a kuberay-operator 1.6.x or 1.7.x chart: the program installs RayCronJob's CRD "
                "(1.6.0+) and its RayCluster/RayJob are validated against the 1.7.0 CRD schemas")
    vendored = vendored_chart_versions()
    if version not in vendored:
        return (f"a chart version whose CRDs are vendored under {KUBERAY_CRD_DIR}/ ("
                + ", ".join(vendored) + "): the CRDs are applied from the repository, never "
                "fetched at `pulumi up`; vendor helm-chart/kuberay-operator/crds/*.yaml of that tag first")
    return None


# An exact version, then one this program supports and whose CRDs are in the repository.
HelmChartVersion = Annotated[str, _rule(
    lambda v: bool(_CHART_VERSION.fullmatch(v)), 'an exact chart version such as "1.7.0"'),
    _why(_chart_version_problem), _schema(_CHART_VERSION.pattern)]


def _image_problem(image: str) -> str | None:
    problem = image_reference_problem(image)
    return None if problem is None else f"a pinned image: it {problem}"


# That the image is a row of data/versions.yaml for job.framework is a rule (rules.py).
PinnedImage = Annotated[str, _why(_image_problem)]

# ---- times ------------------------------------------------------------------------------------


def _written_as_utc(example: str) -> AfterValidator:
    return _rule(lambda v: bool(_RFC3339.fullmatch(v)), f"an RFC 3339 UTC time such as {example}")


_REAL_TIME = _rule(lambda v: rfc3339(v) is not None,
                   "a real RFC 3339 time (month 01-12, a day of that month, hour 00-23)")
# RFC 3339 UTC times as GKE's maintenance policy takes them, and real ones (no month 13); the
# examples are the ones each message has always given.
WindowTime = Annotated[str, _written_as_utc("2025-01-04T02:00:00Z"), _REAL_TIME, _schema(_RFC3339.pattern)]
ExclusionTime = Annotated[str, _written_as_utc("2026-12-01T00:00:00Z"), _REAL_TIME, _schema(_RFC3339.pattern)]
# When a reservation ends (its deleteAtTime, or a calendar-mode reservation's end): the run driver
# has the trainer save before (jobs/contract/capacity_end.py).
ReservationEndTime = Annotated[str, _written_as_utc("2027-01-01T00:00:00Z"), _REAL_TIME, _schema(_RFC3339.pattern)]


def _recurrence_problem(rule: str) -> str | None:
    example = "an RFC 5545 RRULE such as FREQ=WEEKLY;BYDAY=SA,SU"
    if not rule.startswith("FREQ="):
        return example
    problem = rrule_problem(rule)
    return None if problem is None else f"{example} ({problem})"


Recurrence = Annotated[str, _why(_recurrence_problem)]

# ---- addresses ------------------------------------------------------------------------------


def _ipv4_network(value: str, example: str) -> tuple[ipaddress.IPv4Network | None, str | None]:
    try:
        return ipaddress.IPv4Network(value, strict=True), None
    except ValueError as err:
        return None, f"an IPv4 CIDR such as {example} ({err})"


def _subnet_problem(value: str) -> str | None:
    net, problem = _ipv4_network(value, "10.0.0.0/20")
    if net is None:
        return problem
    if not net.is_private:
        return "a private (RFC 1918) range"
    if net.prefixlen > 29:
        return "a prefix of /29 or larger: GCP subnets need at least 8 addresses"
    return None


def _lustre_peering_problem(value: str) -> str | None:
    if not 8 <= ipaddress.IPv4Network(value).prefixlen <= 24:
        return ("a prefix between /8 and /24 (private service access gives each Lustre instance "
                "a /24)")
    return None


def _authorized_problem(value: str) -> str | None:
    net, problem = _ipv4_network(value, "203.0.113.0/24")
    if net is None:
        return problem
    if net.prefixlen == 0:
        return "a range narrower than 0.0.0.0/0: that would open the control plane to the whole internet"
    return None


# Overlaps between the ranges, and the count of RDMA subnets per GPU type, are rules (rules.py).
SubnetCidr = Annotated[str, _why(_subnet_problem)]
LustrePeeringCidr = Annotated[str, _why(_subnet_problem), _why(_lustre_peering_problem)]
AuthorizedCidr = Annotated[str, _why(_authorized_problem)]

# ---- quantities and numbers -------------------------------------------------------------------

CpuQuantity = Annotated[str, _rule(lambda v: bool(_CPU_QUANTITY.fullmatch(v)),
                                   'a Kubernetes quantity such as "8" or "500m"'),
                        _schema(_CPU_QUANTITY.pattern)]
# Zero on Autopilot, and the ephemeral storage against the file cache, are rules (rules.py).
Quantity = Annotated[str, _rule(lambda v: bool(_QUANTITY.fullmatch(v)),
                                'a Kubernetes quantity such as "32Gi"'), _schema(_QUANTITY.pattern)]

FiniteFloat = Annotated[float, _rule(math.isfinite, "a finite number (not .inf or .nan)")]

SoftDeleteRetentionDays = Annotated[int, _rule(
    lambda v: v == 0 or 7 <= v <= 90, "0 (soft delete off) or 7-90 days (Cloud Storage's allowed range)")]

MetadataCacheTtlSeconds = Annotated[int, Field(ge=-1), _rule(
    lambda v: v != 0, "a positive TTL or -1 (never expire): 0 turns gcsfuse's metadata cache off "
    "(a defect of the tutorial)")]

# Bounds pydantic knows go inside the type, before the rule: the JSON schema then shows them.
FlexStartRunSeconds = Annotated[int, Field(ge=600), _rule(
    lambda v: v <= FLEX_START_MAX_RUN_SECONDS,
    f"at most {FLEX_START_MAX_RUN_SECONDS} (7 days, flex-start's limit)")]

LustreThroughputTier = Annotated[int, _rule(
    lambda v: v in LUSTRE_TIERS,
    "one of " + ", ".join(str(t) for t in LUSTRE_TIERS) + " (MB/s per TiB)")]


def _node_ceiling_problem(value: int) -> str | None:
    ceiling = load_config_limits().gpu_nodes_max
    return None if value <= ceiling else (f"at most {ceiling:,}: GKE's limit of nodes per node pool "
                                          "zone (data/config-limits.yaml)")


# Required: a count below 1 is kept as given while its siblings are checked, so the rules that
# compare minNodes and maxNodes with it name gpu.nodes among what they read.
GpuNodes = Annotated[int, _rule(lambda v: v >= 1, "at least 1: the number of GPU nodes the run uses"),
                     _why(_node_ceiling_problem)]
MinGpuNodes = Annotated[int, Field(ge=0), _why(_node_ceiling_problem)]
MaxGpuNodes = Annotated[int, Field(ge=1), _why(_node_ceiling_problem)]


def _active_deadline_problem(value: int) -> str | None:
    maximum = load_config_limits().active_deadline_seconds_max
    return None if value <= maximum else f"at most {maximum:,} (the RayJob field is an int32)"


ActiveDeadlineSeconds = Annotated[int, _why(_active_deadline_problem)]

# A Ray autoscaler timeout (kuberay.autoscaler.*): whole seconds above zero, which the program
# renders as the plain digits Ray's env_integer accepts (components/ray_autoscaler.py). Not below
# job.gpuWaitSeconds: a cross-area rule (rules.py).
AutoscalerTimeoutSeconds = Annotated[int, _rule(
    lambda v: v >= 1, "a whole number of seconds above 0 (Ray reads it as digits; 0 or less is no timeout it "
    "can use)")]

# Replaced by network.lustrePeeringCidr: refused whatever its value.
RetiredPeeringPrefixLength = Annotated[int, _rule(lambda v: False,
                               "not used any more: the private-services range is network.lustrePeeringCidr "
                               '(for example "10.96.0.0/20"), checked disjoint from every other range')]

# ---- job.layout -------------------------------------------------------------------------------

# A split layout's pool: a pool of no node would leave its side of the run without GPUs.
PoolNodes = Annotated[int, _rule(lambda v: v >= 1, "at least 1: a pool of no GPU node cannot "
                                 "roll out or train; use layout.kind colocated instead"),
                      _why(_node_ceiling_problem)]

_CAPACITY_REFERENCE = re.compile(r"^(spot|flexStart|reservation(/[a-z]([-a-z0-9]{0,61}[a-z0-9])?)?)$")
# Which source of gpu.capacity a pool draws from; whether the stack has it is a cross-area rule.
CapacityReference = Annotated[str, _name(
    _CAPACITY_REFERENCE, 80,
    "`spot`, `flexStart`, `reservation` (the stack's one reservation) or `reservation/<name>`"),
    _schema(_CAPACITY_REFERENCE.pattern, 80)]

# ---- monitoring ------------------------------------------------------------------------------

_NOTIFICATION_CHANNEL = re.compile(r"^projects/[a-z][-a-z0-9]{4,28}[a-z0-9]/notificationChannels/[0-9]{1,30}$")
# The resource name Cloud Monitoring gives a channel (projects.notificationChannels, "name":
# "projects/[PROJECT_ID_OR_NUMBER]/notificationChannels/[CHANNEL_ID]"); an e-mail address or a
# bare id is not one.
NotificationChannelName = Annotated[str, _name(
    _NOTIFICATION_CHANNEL, 200,
    "a notification channel's resource name, projects/<project>/notificationChannels/<numeric id> "
    "(`gcloud beta monitoring channels list --format='value(name)'`)"),
    _schema(_NOTIFICATION_CHANNEL.pattern, 200)]

StepTimesFactor = Annotated[float, _rule(
    lambda v: math.isfinite(v) and v >= 1,
    "at least 1: an alert bound below one step time fires between two healthy steps")]


def _alert_minimum_problem(value: int) -> str | None:
    from jobs.plan.checkpoint_interval import load_interruption_priors

    step = load_interruption_priors().step_seconds.value
    if step and value < step:
        return (f"at least one step time, {step:.0f} s (the planner's step time: "
                "data/interruption-priors.yaml): an alert bound below it fires between two "
                "healthy steps")
    return None if value <= 7 * 86400 else "at most 604800 (7 days)"


AlertMinimumSeconds = Annotated[int, _why(_alert_minimum_problem)]


def _driver_port_problem(value: int) -> str | None:
    from components.config.facts import RAY_WORKER_PORTS, ray_reserved_ports

    if not 1024 <= value <= 65535:
        return "1024 to 65535"
    taken = ray_reserved_ports()
    if value in taken:
        return (f"a port of its own: {value} is Ray's {taken[value]} (the Ray pods' ports: "
                + ", ".join(f"{port} {what}" for port, what in sorted(taken.items())) + ")")
    low, high = RAY_WORKER_PORTS
    if low <= value <= high:
        return (f"outside {low}-{high}, the ports Ray's workers bind on the head (ray start "
                "--min-worker-port/--max-worker-port defaults)")
    return None


DriverMetricsPort = Annotated[int, _why(_driver_port_problem)]
