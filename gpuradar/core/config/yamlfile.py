"""Reading a YAML file gpuradar is given (the config file, a rules file): within limits of
size, aliases and depth, with the line of every key and `${VAR}` expanded in every value;
a problem is a ConfigError naming the file and the line."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuradar.core.config.errors import ConfigError, Key, Marks, dotted
from gpuradar.core.text import excerpt

# PyYAML is imported when a file is read: a command run without a config file does not pay
# for its import (a measurable share of `gpuradar prices`: docs/benchmark.md).
if TYPE_CHECKING:
    import yaml

# Limits of a YAML file gpuradar reads (the config file, a rules file): a configuration is a
# few kilobytes; these refuse a hostile or broken file in milliseconds, before it is built.
MAX_YAML_BYTES = 256 * 1024       # the whole file (PyYAML's pure-Python reader is slow)
MAX_SCALAR_CHARS = 64 * 1024      # one value (after ${VAR} expansion)
MAX_YAML_NODES = 100_000          # values once every alias is expanded (billion laughs)
MAX_YAML_DEPTH = 50               # nesting of mappings and lists
MAX_EXPANDED_CHARS = 1024 * 1024  # every value together, once ${VAR} is expanded
MAX_INT_DIGITS = 100              # a whole number (Python refuses to read 4,300 digits)
MAX_PROBLEMS = 20                 # problems one read reports; the rest are counted
_INT_TAG = "tag:yaml.org,2002:int"


_VAR = re.compile(r"\$(?:(\$)|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}|(\{))")


class ExpandedTooLong(ConfigError):
    """A value past its limit once `${VAR}` is expanded."""


def expand_env(text: str, where: str, limit: int = MAX_SCALAR_CHARS,
               values: list[str] | None = None) -> str:
    """`${VAR}`, `${VAR:-default}` (default when unset or empty), `${VAR-default}` (when
    unset) and `$$` (a literal `$`); an unset variable without a default is an error, and so
    is a result longer than `limit` (found while expanding: a large variable used many
    times is refused before it costs the memory). `values` gets each variable's value used:
    what an error must not quote, and a secret wherever it went."""
    grown = 0

    def sub(m: re.Match) -> str:
        nonlocal grown
        if m.group(1):
            return "$"
        if m.group(5):
            raise ConfigError(f"{where}: malformed ${{...}}: write ${{NAME}} or "
                              "${NAME:-default}")
        name, op, default = m.group(2), m.group(3), m.group(4)
        value = os.environ.get(name)
        if (op == ":-" and not value) or (op == "-" and value is None):
            value = default
        elif value is None:
            raise ConfigError(f"{where}: environment variable {name} is not set (write "
                              f"${{{name}:-default}} to give a default)")
        elif values is not None:
            values.append(value)
        grown += len(value) - len(m.group(0))
        if len(text) + grown > limit:
            raise ExpandedTooLong(f"{where}: more than {limit:,} characters once ${{...}} is "
                                  "expanded (docs/limits.md)")
        return value

    return _VAR.sub(sub, text)


def _check_int(node: yaml.ScalarNode, where: str) -> None:
    """A whole number of more than MAX_INT_DIGITS digits is refused with its place (PyYAML
    would raise Python's ValueError on 4,300 digits and more, with no line)."""
    digits = len(node.value.lstrip("+-").lstrip("0"))
    if node.tag == _INT_TAG and digits > MAX_INT_DIGITS:
        raise ConfigError(f"{where}: a whole number of {digits:,} digits (at most "
                          f"{MAX_INT_DIGITS})")


class _Expansion:
    """What one read has expanded so far: the characters every value holds together (at
    most MAX_EXPANDED_CHARS) and the problems found (at most MAX_PROBLEMS are kept)."""

    def __init__(self, size: int) -> None:
        self.left = MAX_EXPANDED_CHARS - size
        self.errors: list[str] = []
        self.more = 0

    def problem(self, line: str) -> None:
        if len(self.errors) < MAX_PROBLEMS:
            self.errors.append(line)
        else:
            self.more += 1


def _walk(node: yaml.Node, keys: Key, marks: Marks, loader: yaml.SafeLoader,
          seen: set[int], found: _Expansion) -> None:
    """Record the line of every key and list item; expand `${VAR}` in every scalar value (a
    plain scalar is then typed as YAML would type the result: `${PORT:-9108}` is a number),
    noting in `marks` the values of the variables each key took."""
    import yaml

    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"
            line = key_node.start_mark.line + 1
            if key in first and key != "<<":
                raise ConfigError(f"{marks.path}:{line}: {dotted(keys + (key,))}: the key "
                                  f"appears twice (also line {first[key]})")
            first[key] = line
            marks.lines[keys + (key,)] = line
            _walk(value_node, keys + (key,), marks, loader, seen, found)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            marks.lines[keys + (i,)] = item.start_mark.line + 1
            _walk(item, keys + (i,), marks, loader, seen, found)
    elif isinstance(node, yaml.ScalarNode) and "$" in node.value:
        where = marks.problem(keys, "").rstrip(": ")
        before = len(node.value)
        values: list[str] = []
        limit = min(MAX_SCALAR_CHARS, before + found.left)
        try:
            node.value = expand_env(node.value, where, limit, values)
        except ExpandedTooLong:
            if limit == MAX_SCALAR_CHARS:
                found.problem(f"{where}: more than {limit:,} characters once ${{...}} is "
                              "expanded (docs/limits.md)")
                return
            # the whole file's budget is spent: nothing after this can be expanded
            raise ConfigError(f"{where}: every value together holds more than "
                              f"{MAX_EXPANDED_CHARS:,} characters once ${{...}} is expanded "
                              "(docs/limits.md)") from None
        except ConfigError as exc:
            for line in exc.problems:
                found.problem(line)
            return
        finally:
            if values:
                marks.env_values[keys] = values
        found.left -= len(node.value) - before
        if node.style is None:
            node.tag = loader.resolve(yaml.ScalarNode, node.value, (True, False))
        _check_int(node, where)


_BRACKET = re.compile(r"[\[\]{}]")


def _check_flow_depth(text: str, path: Path) -> None:
    """Refuse brackets nested deeper than MAX_YAML_DEPTH before parsing: PyYAML's scanner
    slows down with the square of that depth. Counted over the raw text (quotes and comments
    included), so a file would need 50 unclosed brackets inside its strings to be refused
    wrongly."""
    depth = 0
    for m in _BRACKET.finditer(text):
        depth = depth + 1 if m.group() in "[{" else max(0, depth - 1)
        if depth > MAX_YAML_DEPTH:
            line = text.count("\n", 0, m.start()) + 1
            raise ConfigError(f"{path}:{line}: nested more than {MAX_YAML_DEPTH} levels deep")


def _check_limits(root: yaml.Node, path: Path) -> None:
    """Refuse a document whose aliases expand beyond MAX_YAML_NODES values, that nests deeper
    than MAX_YAML_DEPTH, or that holds a value longer than MAX_SCALAR_CHARS. Each node is
    visited once (aliases share nodes), so a bomb costs no more than its own size."""
    import yaml

    weight: dict[int, int] = {}
    depth: dict[int, int] = {}
    # iterative post-order: a node's weight is its own plus its children's, aliases counted
    # every time they are used
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if key in weight and not done:
            continue
        if isinstance(node, yaml.ScalarNode):
            if len(node.value) > MAX_SCALAR_CHARS:
                raise ConfigError(f"{path}:{node.start_mark.line + 1}: a value of "
                                  f"{len(node.value):,} characters (at most "
                                  f"{MAX_SCALAR_CHARS:,}): {excerpt(node.value)}")
            _check_int(node, f"{path}:{node.start_mark.line + 1}")
            weight[key], depth[key] = 1, 0
            continue
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = list(node.value)
        if not done:
            weight[key] = 0  # in progress: a cycle (`&a [*a]`) counts as nothing more
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in weight)
            continue
        weight[key] = 1 + sum(weight.get(id(c), 0) for c in children)
        depth[key] = 1 + max((depth.get(id(c), 0) for c in children), default=0)
        line = f"{path}:{node.start_mark.line + 1}"
        if weight[key] > MAX_YAML_NODES:
            raise ConfigError(f"{line}: the aliases (*name) here expand to more than "
                              f"{MAX_YAML_NODES:,} values; write the values out instead")
        if depth[key] > MAX_YAML_DEPTH:
            raise ConfigError(f"{line}: nested more than {MAX_YAML_DEPTH} levels deep")


def read_yaml(path: Path, marks: Marks, *, expand: bool = True) -> Any:
    """The file's data with `${VAR}` expanded (unless not `expand`); `marks` gets the line of
    every key. Within the limits above: ConfigError names the file and line otherwise."""
    import yaml

    try:
        with path.open("rb") as f:
            raw = f.read(MAX_YAML_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path} cannot be read: {exc.strerror}") from None
    if len(raw) > MAX_YAML_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_YAML_BYTES // 1024} KiB; a configuration "
                          "or rules file is at most that")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start + 1})") from None
    _check_flow_depth(text, path)
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return {}
        _check_limits(node, path)
        found = _Expansion(len(text))
        if expand:
            _walk(node, (), marks, loader, set(), found)
        if found.errors:
            raise ConfigError(found.errors, more=found.more)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"{path}:{mark.line + 1}" if mark else str(path)
        column = f" (column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).replace("\n", " ")
        raise ConfigError(f"{at}: not valid YAML{column}: {problem[:200]}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested more than {MAX_YAML_DEPTH} levels deep") from None
    finally:
        loader.dispose()
