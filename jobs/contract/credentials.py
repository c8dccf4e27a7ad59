"""The project's one credential rule: which names and which values are secrets, and how to keep
them out of anything printed.

    looks_like_secret_name("HF_TOKEN") -> True          looks_like_secret_name("MAX_TOKENS") -> False
    looks_like_secret_value("hf_...") -> True           secret_value_kind(text) -> "a Hugging Face token (hf_...)"
    redact("x --wandb_api_key=abc") -> "x --wandb_api_key=[redacted]"

Used by the stack config's messages (components/config/), preflight (jobs/plan/preflight), the
jobs CLI's submission guard (jobs/cli/ray_jobs.py) and the policy pack (policy/rules.py, which loads this
file by path: it runs in its own virtualenv and imports nothing of the program). Standard
library only.

Names are split into words (``_``, ``-``, ``.``, camelCase boundaries): a name is a credential
when a word says so (TOKEN, SECRET, PASSWORD, PASSPHRASE, ...) or a KEY is qualified (API KEY,
ACCESS KEY, PRIVATE KEY ...), unless its last word says where a credential is rather than what it
is (HF_TOKEN_PATH, TOKEN_FILE). So ``TOKENIZERS_PARALLELISM``, ``MAX_TOKENS`` and
``KEYRING_BACKEND`` are not credentials and ``DB_PASSPHRASE``, ``wandbApiKey`` and ``hf_token``
are. ``GOOGLE_APPLICATION_CREDENTIALS`` names a key *file*'s path, not a secret.

Values are credentials when they contain a known token format (Hugging Face, OpenAI-style
``sk-``, GitHub, Slack, Google API key, AWS access key id, a PEM private key) or an assignment
``name=value`` / ``name: value`` whose name is a credential and whose value is not a reference
(``$HF_TOKEN``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

REDACTED = "[redacted]"

_CREDENTIAL_WORDS = frozenset({
    "TOKEN", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "PASSPHRASE", "APIKEY",
    "CREDENTIAL", "CREDENTIALS", "PRIVATEKEY", "ACCESSTOKEN", "AUTHTOKEN", "HFTOKEN",
})
# KEY alone is not a credential (KEYRING_BACKEND, CACHE_KEY): qualified ones are.
_KEY_QUALIFIERS = frozenset({"API", "ACCESS", "PRIVATE", "SECRET", "SIGNING", "ENCRYPTION",
                             "SSH", "AUTH", "CLIENT", "MASTER"})
# Last words that say where a credential is, not what it is.
_LOCATION_WORDS = frozenset({"PATH", "FILE", "FILENAME", "DIR", "DIRECTORY", "HOME", "REF",
                             "NAME", "ENV", "MOUNT"})
_NOT_CREDENTIALS = frozenset({"GOOGLE_APPLICATION_CREDENTIALS"})
# Last words that make a name a measure or an index of tokens, not a credential
# (ppo_max_token_len_per_gpu, pad_token_id, max_token_budget).
_MEASURE_WORDS = frozenset({"LEN", "LENS", "LENGTH", "LENGTHS", "COUNT", "COUNTS", "NUM", "LIMIT",
                            "LIMITS", "SIZE", "SIZES", "BUDGET", "ID", "IDS", "INDEX", "TYPE",
                            "RATIO", "RATE", "GPU", "DEVICE", "STEP", "STEPS"})
# Words before TOKEN that name a tokenizer's special token (pad_token, eos_token) or a bound.
_TOKEN_QUALIFIERS = frozenset({"PAD", "EOS", "BOS", "UNK", "SEP", "CLS", "MASK", "SPECIAL", "START",
                               "STOP", "END", "MAX", "MIN", "NUM", "IMAGE", "VISION", "AUDIO"})

_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")

# Values that are credentials whatever they are called. Messages name the kind, never the value.
_TOKEN_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # No word boundary before hf_/ghp_/xox: a token glued to other text ("mhf_...") is one too;
    # the 30+ characters after the prefix keep ordinary words out.
    ("a Hugging Face token (hf_...)", re.compile(r"hf_[A-Za-z0-9]{30,}")),
    ("an API key (sk-...)", re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}")),
    ("a GitHub token (ghp_...)",
     re.compile(r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{20,})")),
    ("a Slack token (xox...)", re.compile(r"xox[abpr]-[A-Za-z0-9-]{10,}")),
    # The whole PEM block, so that redact() removes the key, not only its header.
    ("a private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?:[\s\S]*?"
                                 r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|[\s\S]*)")),
    ("a Google API key (AIza...)", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
)
# name=value or name: value (command lines, Hydra overrides, YAML, URLs' query strings). The
# name may be dotted (+trainer.hf_token) or a flag (--wandb_api_key); the value runs to the next
# blank, quote, comma or separator.
_ASSIGNMENT = re.compile(
    r"(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)(?P<sep>[ \t]*[=:][ \t]*)(?P<quote>['\"]?)"
    r"(?P<value>[^\s'\",;&|)\]}]+)")


def _words(name: str) -> list[str]:
    return [w.upper() for w in _WORD_SPLIT.split(name) if w]


def looks_like_secret_name(name: str) -> bool:
    """Whether a key or env var name says it holds a credential (HF_TOKEN, hfToken, hf_token,
    WANDB_API_KEY, wandbApiKey, DB_PASSPHRASE, AWS_SECRET_ACCESS_KEY), but not
    TOKENIZERS_PARALLELISM, MAX_TOKENS, HF_TOKEN_PATH, ppo_max_token_len_per_gpu, pad_token or
    GOOGLE_APPLICATION_CREDENTIALS. A dotted name (``trainer.hf_token``) is judged by its last
    part."""
    name = str(name).strip().lstrip("+~-")
    name = name.rsplit(".", 1)[-1]
    if name.upper() in _NOT_CREDENTIALS:
        return False
    words = _words(name)
    if not words or words[-1] in _LOCATION_WORDS or words[-1] in _MEASURE_WORDS:
        return False
    for i, word in enumerate(words):
        if word == "TOKEN" and i > 0 and words[i - 1] in _TOKEN_QUALIFIERS:
            continue
        if word in _CREDENTIAL_WORDS:
            return True
        if word in ("KEY", "KEYS") and i > 0 and words[i - 1] in _KEY_QUALIFIERS:
            return True
        if word.endswith("APIKEY") or word.endswith("PASSWORD"):
            return True
    return False


def _assignments(text: str) -> Iterator[re.Match[str]]:
    for match in _ASSIGNMENT.finditer(text):
        value = match.group("value")
        if looks_like_secret_name(match.group("name")) and value \
                and not value.startswith(("$", REDACTED[:-1])) \
                and value.lower() not in ("null", "none", "~", "true", "false", "''", '""'):
            yield match


def secret_value_kind(value: object) -> str | None:
    """What kind of credential a value contains ("a Hugging Face token (hf_...)", "a credential
    assignment (name=value)"), or None."""
    text = str(value)
    for kind, pattern in _TOKEN_PATTERNS:
        if pattern.search(text):
            return kind
    for match in _assignments(text):
        return f"a credential assignment ({match.group('name')}=...)"
    return None


def looks_like_secret_value(value: object) -> bool:
    """Whether a value (an env value, a command line, an override, a config value) contains a
    credential: a known token format, or ``<credential name>=<literal>``."""
    return secret_value_kind(value) is not None


def redact(text: object) -> str:
    """``text`` with every token and the value of every credential assignment replaced by
    "[redacted]"; the rest is kept so a message still says where the problem is."""
    out = str(text)
    for _kind, pattern in _TOKEN_PATTERNS:
        out = pattern.sub(REDACTED, out)
    pieces, last = [], 0
    for match in _assignments(out):
        pieces.append(out[last:match.start("value")])
        pieces.append(REDACTED)
        last = match.end("value")
    pieces.append(out[last:])
    return "".join(pieces)
