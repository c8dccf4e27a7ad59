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

Plain scalars are typed as the Pulumi CLI types them, not as PyYAML's YAML 1.1 defaults would, so
the preview and `pulumi up` read the same values. The CLI parses stack files with go-yaml v3
(pulumi/pulumi v3.259.0 sdk/go/common/encoding/marshal.go; sdk/go.mod pins gopkg.in/yaml.v3
v3.0.1, whose resolve.go is mirrored here) and hands object values to the program as JSON
(sdk/go/common/resource/config/object.go). So: ``1e-6`` is a float (YAML 1.1 wants a dot);
integers follow Go's ``strconv.ParseInt(s, 0, 64)`` after underscores are removed (``0x10`` is 16,
``010`` and ``0o10`` are 8); only ``true``/``false`` (and their Title and UPPER forms) are booleans
(``yes``/``no``/``on``/``off`` stay text); ``~``/``null`` is null; a whole float comes back as an
integer (Go's encoding/json writes 2.0 as 2); ``.inf``/``.nan`` are refused (the CLI cannot write
them as JSON and fails to load the file); an unquoted date or time is refused with a hint to quote
it (the CLI turns it into Go's ``2025-01-04 02:00:00 +0000 UTC``, which no time key accepts).
A top-level number reaches the program as the text of its JSON form (``1e-6`` as ``0.000001``).
Read from the sources on 2026-12-01 (not run: no Pulumi CLI here); docs/errors-and-guarantees.md.

Standard library + PyYAML only: jobs/ code runs on the Ray head too, and tools/ and components/
import it (the layering is tools -> components -> jobs).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from decimal import Decimal
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


# go-yaml v3.0.1 resolve.go: the plain scalars that are not text.
_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_NUMBER = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)(?:[eE][-+]?[0-9]+)?$"
                     r"|^[-+]?0[xXoObB][0-9a-fA-F_]+$")
_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_SPECIAL_FLOAT = re.compile(r"^(?:[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")
# go-yaml's allowedTimestampFormats: a date, optionally with a time.
_TIMESTAMP = re.compile(r"^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}"
                        r"(?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?)?$")
# Go's encoding/json writes a float in exponent form from 1e21 on: below that a whole float is
# written as an integer, which the program then reads as one.
_JSON_EXPONENT_FROM = 1e21


def go_parse_int(text: str) -> int | None:
    """strconv.ParseInt(text, 0, 64): a sign, then 0x/0o/0b or a leading 0 (octal) or decimal;
    None where Go would return an error (an invalid digit, out of the int64 range)."""
    sign, digits = (-1, text[1:]) if text[:1] == "-" else (1, text.lstrip("+") if text[:1] == "+" else text)
    base = 10
    if digits[:2].lower() in ("0x", "0o", "0b"):
        base, digits = {"x": 16, "o": 8, "b": 2}[digits[1].lower()], digits[2:]
    elif len(digits) > 1 and digits[0] == "0":
        base, digits = 8, digits[1:]
    try:
        value = sign * int(digits, base) if digits and digits.isalnum() else None
    except ValueError:
        return None
    return value if value is not None and -(2**63) <= value < 2**63 else None


def go_json_float(number: float) -> str:
    """A float as Go's encoding/json writes it: the shortest digits, in plain form from 1e-6 to
    below 1e21 and with an exponent outside it, ``e-07`` written ``e-7``."""
    if number != 0 and not 1e-6 <= abs(number) < _JSON_EXPONENT_FROM:
        mantissa, _, exponent = f"{number!r}".partition("e")
        return f"{mantissa}e{exponent[0]}{exponent[1:].lstrip('0') or '0'}"
    text = format(Decimal(repr(number)), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


class _StackFileLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases, excessive depth and duplicate keys, and types plain
    scalars as the Pulumi CLI does (the module's docstring)."""

    yaml_implicit_resolvers: ClassVar[dict[str | None, list[tuple[str, re.Pattern[str]]]]] = {}

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode and implicit[0]:
            if _NULL.match(value):
                return "tag:yaml.org,2002:null"
            if _BOOL.match(value):
                return "tag:yaml.org,2002:bool"
            if _SPECIAL_FLOAT.match(value) or _NUMBER.match(value):
                return "tag:yaml.org,2002:float"
            if _TIMESTAMP.match(value):
                return "tag:yaml.org,2002:timestamp"
        resolved: str = super().resolve(kind, value, implicit)
        return resolved

    def construct_yaml_bool(self, node: yaml.ScalarNode) -> bool:
        return str(self.construct_scalar(node)).lower() == "true"

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float | int | str:
        text = str(self.construct_scalar(node))
        if _SPECIAL_FLOAT.match(text):
            raise _Refused(f"line {node.start_mark.line + 1}: {text} is not a number JSON can carry: the "
                           "Pulumi CLI cannot load a stack file with it (write a finite number)")
        plain = text.replace("_", "")
        as_int = go_parse_int(plain)
        if as_int is not None:
            return as_int
        if re.fullmatch(r"[-+]?[1-9][0-9]*", plain):
            raise _Refused(f"line {node.start_mark.line + 1}: an integer of {len(plain)} characters is outside "
                           "the 64-bit range the Pulumi CLI reads")
        if not _FLOAT.match(plain):
            return text                       # 0x1G, 1_0x...: text, as go-yaml leaves it
        number = float(plain)
        if number.is_integer() and abs(number) < _JSON_EXPONENT_FROM:
            return int(number)
        return number

    def construct_yaml_timestamp(self, node: yaml.ScalarNode) -> str:
        text = str(self.construct_scalar(node))
        raise _Refused(f"line {node.start_mark.line + 1}: an unquoted date or time ({truncate(text, 40)}): "
                       "the Pulumi CLI turns it into Go's time format, which no time key accepts; "
                       f'quote it ("{truncate(text, 40)}")')

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


_StackFileLoader.add_constructor("tag:yaml.org,2002:bool", _StackFileLoader.construct_yaml_bool)
_StackFileLoader.add_constructor("tag:yaml.org,2002:float", _StackFileLoader.construct_yaml_float)
_StackFileLoader.add_constructor("tag:yaml.org,2002:timestamp", _StackFileLoader.construct_yaml_timestamp)


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


def stack_file_path(root: Path, stack: str, config_file: str | Path | None = None) -> Path:
    """The file a stack's offline readers read: ``config_file`` as given, else
    ``root/Pulumi.<stack>.yaml`` (the project root, whatever the current directory). A stack
    with no file there is a ConfigFileError that lists the stacks that have one."""
    if config_file:
        return Path(config_file)
    path = root / f"Pulumi.{stack}.yaml"
    if not path.exists():
        stacks = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in root.glob("Pulumi.*.yaml"))
        raise ConfigFileError(f"no stack {truncate(stack, 40)!r}: {root} has no Pulumi.{truncate(stack, 40)}.yaml; "
                              f"the stacks here: {', '.join(stacks) or 'none'} (or give --config-file FILE)")
    return path


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
        elif isinstance(value, float):
            raw[key] = go_json_float(value)
        elif value is None:
            raw[key] = ""
        else:
            raw[key] = str(value)
    for key in offline_secrets:
        if key not in raw:
            raw[key] = SECRET_PLACEHOLDER
            secret_keys.add(key)
    return raw, secret_keys
