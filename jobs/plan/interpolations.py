"""OmegaConf resolvers in trainer overrides: only a small allowlist, checked on the raw text.

verl and NeMo RL hand every override to OmegaConf, which evaluates ``${name:args}`` resolvers
when the trainer reads its config. OmegaConf 2.3 registers, at import (omegaconf/omegaconf.py
``register_default_resolvers``, v2.3.0, unchanged in 2.3.1): ``oc.create``, ``oc.decode``,
``oc.deprecated``, ``oc.env``, ``oc.select``, ``oc.dict.keys``, ``oc.dict.values``.
``oc.env:HF_TOKEN`` copies a credential from the trainer's environment into its config, which both
frameworks print and can send to W&B; ``oc.decode`` and ``oc.create`` evaluate a string as config
(``oc.create`` parses YAML, whose ``\\x24`` escape spells ``$`` without writing it). So:

- ``gke-grpo:job.extraOverrides`` may use ``oc.select`` (an interpolation with a default: it reads
  only the config itself; verl v0.7.1's own YAML uses it, e.g. trainer/config/actor/actor.yaml)
  and ``mul`` (arithmetic, registered by NeMo RL v0.5.0's entry scripts, e.g.
  examples/run_grpo_math.py: ``OmegaConf.register_new_resolver("mul", lambda a, b: a * b)``);
  plain node interpolations ``${a.b}`` read the config only and are allowed too;
- the renderer's own overrides (jobs/plan/render.py) additionally use ``oc.env`` for the variables
  the run driver sets per trainer start, none a secret: the TensorBoard folder, and the end of
  capacity that ends on schedule (verl's expiration timestamp, NeMo RL's checkpoint_must_save_by:
  jobs/contract/capacity_end.py); and ``oc.create`` in the one verl override that builds the
  TaskRunner's runtime_env from a dict literal;
- everything else is refused: any other resolver, a resolver name that is itself an
  interpolation (``${${x}:...}``), or an ``oc.env`` of another variable.

The scan is deliberately coarser than OmegaConf's grammar: every ``${`` counts, escaped or not
(OmegaConf reads ``\\${`` as a literal, but an even run of backslashes before it does not escape
it), and whitespace after ``${`` is skipped as the grammar does (``INTER_OPEN: '${' WS?``,
omegaconf/grammar/OmegaConfGrammarLexer.g4, v2.3.0). A refused literal is cheap; a missed
resolver leaks a credential.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from jobs.contract.capacity_end import NEMO_RL_SAVE_BY_ENV, VERL_EXPIRATION_ENV
from jobs.contract.records import TENSORBOARD_ENV

# Resolvers an extra override may call.
USER_RESOLVERS = frozenset({"oc.select", "mul"})
# Resolvers only the renderer's own overrides may call (oc.env: for ENV_ALLOWED only).
RENDERER_RESOLVERS = frozenset({"oc.env", "oc.create"})
ENV_ALLOWED = frozenset({TENSORBOARD_ENV, VERL_EXPIRATION_ENV, NEMO_RL_SAVE_BY_ENV})
_NAME = re.compile(r"[A-Za-z0-9_.\-\[\]]*")


@dataclass(frozen=True)
class ResolverUse:
    name: str            # "" when the name could not be read (an interpolated name)
    argument: str        # the first argument's text, up to ',' or '}'
    offset: int


def resolver_uses(text: str) -> list[ResolverUse]:
    """Every ``${name:...}`` resolver call in ``text`` (nested ones too, since every ``${`` is
    scanned); a plain ``${a.b}`` node interpolation is not a call."""
    uses: list[ResolverUse] = []
    start = text.find("${")
    while start != -1:
        at = start + 2
        while at < len(text) and text[at] in " \t":
            at += 1
        name = _NAME.match(text, at)
        word = name.group(0) if name else ""
        after = name.end() if name else at
        while after < len(text) and text[after] in " \t":
            after += 1
        following = text[after:after + 1]
        if following == ":":
            argument = re.split(r"[,}]", text[after + 1:], maxsplit=1)[0].strip()
            uses.append(ResolverUse(word, argument, start))
        elif following != "}" or not word:
            # "${${x}:...}", "${", "${ }": nothing this scan can name; never allowed.
            uses.append(ResolverUse("", text[at:at + 20], start))
        start = text.find("${", start + 2)
    return uses


def refused_resolvers(text: str, *, renderer: bool = False) -> list[str]:
    """Why each resolver call in ``text`` is refused (empty: none is). ``renderer``: the text is
    one of the renderer's own overrides, which may also use RENDERER_RESOLVERS."""
    allowed = USER_RESOLVERS | (RENDERER_RESOLVERS if renderer else frozenset())
    reasons = []
    for use in resolver_uses(text):
        if not use.name:
            reasons.append("an interpolation whose resolver cannot be read (a resolver name "
                           "that is itself an interpolation, or an unclosed ${)")
        elif use.name not in allowed:
            reasons.append(f"the OmegaConf resolver {use.name!r} (allowed: "
                           f"{', '.join(sorted(USER_RESOLVERS))})")
        elif use.name == "oc.env" and use.argument not in ENV_ALLOWED:
            reasons.append("oc.env of a variable other than "
                           + ", ".join(sorted(ENV_ALLOWED)))
    return reasons
