"""House rules every ComponentResource in components/ keeps, checked on the
source: each takes its own args dataclass (never the whole StackConfig), and every public
attribute it sets is declared on the class, so a dependant reads only what its owner declares.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

COMPONENTS = Path(__file__).resolve().parents[2] / "components"


def _component_classes():
    for path in sorted(COMPONENTS.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and any(
                    ast.unparse(base) == "pulumi.ComponentResource" for base in node.bases):
                yield path, node


CLASSES = list(_component_classes())


def test_every_component_is_found_one_per_file():
    names = [cls.name for _, cls in CLASSES]
    assert {"GkeCluster", "GpuCapacity", "GpuNetworks", "GrpoJob", "KubeRay", "NodeServiceAccount",
            "ProjectServices", "SharedStorage"} <= set(names)
    files = [path for path, _ in CLASSES]
    assert len(files) == len(set(files)), "one ComponentResource per file"


@pytest.mark.parametrize("path,cls", CLASSES, ids=[cls.name for _, cls in CLASSES])
def test_component_takes_its_own_args_not_the_stack_config(path, cls):
    [init] = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
    annotations = {a.arg: ast.unparse(a.annotation) if a.annotation else "" for a in init.args.args}
    assert "args" in annotations and annotations["args"] == f"{cls.name}Args", annotations
    assert "StackConfig" not in ast.unparse(cls), f"{cls.name} reads the whole stack config"


@pytest.mark.parametrize("path,cls", CLASSES, ids=[cls.name for _, cls in CLASSES])
def test_every_public_attribute_is_declared(path, cls):
    declared = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    assigned = set()
    for node in ast.walk(cls):
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) else [])
        for target in targets:
            for leaf in ast.walk(target):
                if (isinstance(leaf, ast.Attribute) and isinstance(leaf.value, ast.Name)
                        and leaf.value.id == "self" and not leaf.attr.startswith("_")):
                    assigned.add(leaf.attr)
    assert assigned - declared == set(), f"{cls.name} sets undeclared attributes"


def test_no_component_module_over_600_lines():
    long = {p.name: n for p in COMPONENTS.glob("*.py")
            if not p.name.startswith("config") and (n := len(p.read_text().splitlines())) > 600}
    assert long == {}
