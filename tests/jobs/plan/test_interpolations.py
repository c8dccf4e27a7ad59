"""Hostile extraOverrides: OmegaConf resolvers beyond the allowlist are refused by preflight and by
the renderer, each default resolver of the pinned OmegaConf (2.3.1) among them, and the threat is
real: OmegaConf itself copies an environment variable into the config (tested for real here)."""

from __future__ import annotations

import dataclasses

import pytest
from omegaconf import OmegaConf

from jobs.plan.interpolations import USER_RESOLVERS, refused_resolvers, resolver_uses
from jobs.plan.preflight import check
from jobs.plan.render import render
from tests.jobs.plan.test_preflight import DEV, PROD

EXTRA = "gke-grpo:job.extraOverrides"


def _default_resolvers() -> set[str]:
    # omegaconf/omegaconf.py register_default_resolvers (v2.3.0 = 2.3.1): what a trainer has.
    from omegaconf.basecontainer import BaseContainer

    return set(BaseContainer._resolvers)


def test_oc_env_really_copies_the_environment(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_not_a_real_token")
    config = OmegaConf.create({"logger": {"name": "${oc.env:HF_TOKEN}"}})
    assert OmegaConf.to_container(config, resolve=True)["logger"]["name"] == "hf_not_a_real_token"


def test_every_default_resolver_but_the_allowlist_is_refused():
    defaults = _default_resolvers()
    assert {"oc.env", "oc.decode", "oc.create", "oc.select", "oc.deprecated"} <= defaults
    for name in sorted(defaults):
        refused = refused_resolvers(f"+probe=${{{name}:x}}")
        assert bool(refused) == (name not in USER_RESOLVERS), (name, refused)


HOSTILE = [
    "trainer.project_name=${oc.env:HF_TOKEN}",
    "+a=${oc.env:HF_TOKEN,none}",
    "+a=${ oc.env :HF_TOKEN}",                       # whitespace the grammar skips
    "+a=${oc.decode:'${oc.env:HF_TOKEN}'}",
    "+a=${oc.create:'{x: \"\\x24{oc.env:HF_TOKEN}\"}'}",  # YAML escape spells the $
    "+a=${oc.deprecated:trainer.nnodes}",
    "+a=${oc.dict.keys:trainer}",
    "+a=${oc.dict.values:trainer}",
    "+a=${${name}:HF_TOKEN}",                         # the resolver's name is an interpolation
    "+a=\\${oc.env:HF_TOKEN}",                        # escaped: still refused (coarse on purpose)
    "+a=prefix-${oc.select:x,${oc.env:HF_TOKEN}}",    # nested inside an allowed one
    "+a=${my_custom:1}",
    "+a=${oc.env:GKE_GRPO_TENSORBOARD_DIR}",          # the renderer's own, not a user's
]


@pytest.mark.parametrize("spec", [DEV, PROD], ids=lambda s: s.framework)
@pytest.mark.parametrize("override", HOSTILE)
def test_hostile_resolvers_are_refused_by_preflight_and_render(spec, override):
    bad = dataclasses.replace(spec, extra_overrides=(override,))
    errors = [f for f in check(bad) if f.level == "error" and f.key == EXTRA
              and ("resolver" in f.message or "interpolation" in f.message)]
    assert errors, override
    assert "HF_TOKEN" not in " ".join(f.message for f in errors)   # never echoed
    with pytest.raises(ValueError, match="refused OmegaConf interpolation"):
        render(bad)


@pytest.mark.parametrize("override", ["+a=${oc.select:trainer.nnodes,1}", "+a=${mul:2,3}",
                                      "+a=${trainer.nnodes}", "+a=plain-text"])
def test_allowed_interpolations_pass(override):
    assert refused_resolvers(override) == []


def test_the_renderers_own_resolvers_pass_for_the_renderer_only():
    for spec in (DEV, PROD):
        rendered = render(spec).overrides        # does not raise: env only for TensorBoard
        uses = {u.name for o in rendered for u in resolver_uses(o)}
        assert uses <= {"oc.env", "oc.create"}, uses
        assert any(refused_resolvers(o) for o in rendered)   # a user could not write them


def test_a_stack_value_carrying_an_interpolation_is_refused():
    bad = dataclasses.replace(DEV, kl_loss_type="${oc.env:HF_TOKEN}")   # a free string key
    found = [f for f in check(bad) if "rendered override" in f.message]
    assert found and all(f.level == "error" for f in found)
