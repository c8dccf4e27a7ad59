"""gke-grpo-guardrails: the policy pack run by `pulumi preview --policy-pack policy`.

The rules live in rules.py (pure checks + their ResourceValidationPolicy objects, all
mandatory); this file only serves them. It runs in policy/venv (see PulumiPolicy.yaml), which
has none of the program's dependencies.
"""

import os
import sys

# The CLI runs this file with runpy; make rules.py importable however it is started.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from pulumi_policy import EnforcementLevel, PolicyPack
from rules import POLICIES

PACK_NAME = "gke-grpo-guardrails"

PolicyPack(
    name=PACK_NAME,
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=POLICIES,
    description="Guardrails of gke-grpo: GPU provisioning model, private Ray head, no "
                "privileged pods, pinned images, protected prod data, no plain-text secrets, "
                "bucket-scoped IAM, the Ray autoscaler's rights on the head alone.",
)
