"""The one reader of stack files (``Pulumi.<stack>.yaml``): the offline preview, preflight and the
jobs CLI read a config file through ``read_stack_file`` and nothing else, so that a hostile or
broken file is refused the same way everywhere, in bounded time and memory, with one line that
names the file and what is wrong, and never a traceback:

- not a regular file (a directory, a FIFO, ``/dev/zero``, a socket), more than ``MAX_BYTES``,
  not UTF-8 (a Latin-1 byte, UTF-16, random bytes): refused by the one safe reader of the
  project, jobs/contract/safe_files.py, as every other file the programs read;
- YAML aliases (``*name``), the vehicle of "billion laughs" bombs: refused, with the line (a
  Pulumi stack file never needs them);
- nesting deeper than ``MAX_DEPTH``: refused while composing, before recursing further;
- a mapping key given twice: refused, naming both lines (PyYAML would silently keep the last);
- a syntax error: the line and column and the parser's problem, never the offending text
  (it could be a secret).

Standard library + PyYAML only: jobs/ code runs on the Ray head too, and tools/ and components/
import it (the layering is tools -> components -> jobs).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

import yaml

from jobs.contract.credentials import redact
from jobs.contract.safe_files import MAX_JSON_DEPTH, STACK_FILE, UnusableFile, decode_utf8, read_bytes

PROJECT = "gke-grpo"
# The cap (256 KiB) and the depth bound are the shared reader's (jobs/contract/safe_files.py):
# the deepest real stack file nests 4 levels (config > area > object > list).
MAX_BYTES = STACK_FILE.max_bytes
MAX_DEPTH = MAX_JSON_DEPTH
# What the preview puts in place of a `secure:` value it cannot decrypt.
SECRET_PLACEHOLDER = "offline-preview-placeholder"
_ECHO_CHARS = 80


class ConfigFileError(Exception):
    """A stack file that cannot be used: the message is one line, naming the file, with
    anything that looks like a credential redacted (jobs/contract/credentials.py)."""

    def __init__(self, message: str):
        super().__init__(redact(" ".join(str(message).split())))


def truncate(text: object, limit: int = _ECHO_CHARS) -> str:
    """An echoed value, cut to ``limit`` characters (with how much was left out)."""
    text = str(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


class _StackFileLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases, excessive depth and duplicate keys, and keeps
    timestamps as the text written (``startTime: 2025-01-04T02:00:00Z`` unquoted stays that
    string: the config rules check RFC 3339 text, and a datetime is not JSON)."""

    yaml_implicit_resolvers: ClassVar[dict[str | None, list[tuple[str, re.Pattern[str]]]]] = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: yaml.Node | int | None) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise _Refused(f"line {event.start_mark.line + 1}: YAML aliases (*{event.anchor}) "
                           "are not accepted in a stack file (write the value out)")
        self._depth += 1
        if self._depth > MAX_DEPTH:
            mark = self.peek_event().start_mark
            raise _Refused(f"line {mark.line + 1}: nested deeper than {MAX_DEPTH} levels")
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    hash(key)
                except TypeError:
                    raise _Refused(f"line {key_node.start_mark.line + 1}: a mapping key must be a "
                                   "string, not a list or a mapping") from None
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise _Refused(f"duplicate key {truncate(key)!r} on line {seen[key]} and line "
                                   f"{line} (YAML keeps only the last one: remove one)")
                seen[key] = line
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)   # yaml has no stubs here
        return mapping


class _Refused(Exception):
    pass


def _read_bounded(path: Path) -> bytes:
    try:
        return read_bytes(path, STACK_FILE)
    except UnusableFile as err:
        raise ConfigFileError(str(err)) from None


def load_yaml_text(data: bytes, where: str) -> Any:
    """UTF-8 bytes -> the YAML document, refusing what the module docstring lists."""
    try:
        text = decode_utf8(data, where)
    except UnusableFile as err:
        raise ConfigFileError(str(err)) from None
    if "\x00" in text:
        raise ConfigFileError(f"{where}: a NUL character at offset {text.index(chr(0))}: "
                              "not a text file")
    loader = None
    try:
        loader = _StackFileLoader(text)
        return loader.get_single_data()
    except yaml.reader.ReaderError as err:
        raise ConfigFileError(f"{where}: character U+{err.character:04X} at offset {err.position} "
                              "is not allowed in YAML (a control character)") from None
    except _Refused as err:
        raise ConfigFileError(f"{where}: {err}") from None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = " ".join(p for p in (err.context, err.problem) if p)
        raise ConfigFileError(f"{where} is not valid YAML: {at}{truncate(what, 160)}") from None
    except yaml.YAMLError as err:
        raise ConfigFileError(f"{where} is not valid YAML: {truncate(err, 160)}") from None
    except (ValueError, OverflowError, RecursionError, MemoryError) as err:
        # e.g. an integer of more digits than Python converts (sys.int_info.str_digits_check_threshold)
        raise ConfigFileError(f"{where}: a value YAML cannot convert "
                              f"({type(err).__name__}: {truncate(err, 100)})") from None
    finally:
        if loader is not None:
            loader.dispose()


def read_stack_document(path: Path | str) -> dict[str, Any]:
    """The stack file as a mapping with a ``config:`` mapping (ConfigFileError otherwise)."""
    path = Path(path)
    document = load_yaml_text(_read_bounded(path), str(path))
    if document is None:
        document = {}
    if not isinstance(document, dict) or not isinstance(document.get("config") or {}, dict):
        raise ConfigFileError(f"{path}: expected a mapping with a `config:` mapping")
    return document


def read_stack_file(path: Path | str, offline_secrets: Iterable[str] = ()) -> tuple[dict[str, str], set[str]]:
    """A Pulumi.<stack>.yaml -> (config map as the engine hands it to the program, secret keys).

    Objects and lists become JSON strings and scalars strings, as the language host passes
    them; `secure:` values become a placeholder marked secret. Each full key of
    `offline_secrets` the file does not set gets the same placeholder: the committed stack
    files carry no ciphertext (a fake one would stop a real `pulumi preview` that cannot
    decrypt it), so the offline readers stand in for the secret `pulumi config set --secret`
    adds on a real stack.
    """
    document = read_stack_document(path)
    raw: dict[str, str] = {}
    secret_keys: set[str] = set()
    for name, value in (document.get("config") or {}).items():
        key = str(name)
        if ":" not in key:
            key = f"{PROJECT}:{key}"
        if isinstance(value, dict) and set(value) == {"secure"}:
            raw[key] = SECRET_PLACEHOLDER
            secret_keys.add(key)
        elif isinstance(value, (dict, list)):
            try:
                raw[key] = json.dumps(value, default=str)
            except (ValueError, RecursionError) as err:
                raise ConfigFileError(f"{path}: {key} cannot be passed to the program "
                                      f"({type(err).__name__})") from None
        elif isinstance(value, bool):
            raw[key] = "true" if value else "false"
        elif value is None:
            raw[key] = ""
        else:
            raw[key] = str(value)
    for key in offline_secrets:
        if key not in raw:
            raw[key] = SECRET_PLACEHOLDER
            secret_keys.add(key)
    return raw, secret_keys
