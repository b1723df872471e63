"""Parse YAML that users hand us (rule files, gate configs) with limits.

``yaml.safe_load`` builds no Python objects from tags, but it still expands aliases and
recurses on nesting, so a few hundred bytes can describe billions of nodes ("billion
laughs") and deep nesting overflows the parser's stack. Here the document is composed
first (aliases stay shared references, nothing is expanded) and walked iteratively: too
large a file, too many nodes counting every alias expansion, or too deep a nesting is one
clear error instead of a hang, a memory blow-up or a RecursionError.
"""

from __future__ import annotations

import yaml

from advisor.errors import AdvisorInputError

# the C parser (libyaml) when PyYAML has it: for files we ship, which need no limits
PACKAGED_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_BYTES = 1 << 20  # 1 MiB: rule files and gate configs are a few kB
MAX_NODES = 100_000  # nodes after expanding aliases
MAX_DEPTH = 64


def load_user_yaml(text: str, source: str, what: str):
    """The YAML document in ``text`` as Python data; AdvisorInputError naming ``source``
    (``what``: 'rule file', 'gate config') when it is not valid YAML or exceeds a limit."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise AdvisorInputError(source, f"{what} is larger than {MAX_BYTES >> 20} MiB")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise AdvisorInputError(source, f"{what} is nested too deeply") from None
    except yaml.YAMLError as exc:
        raise AdvisorInputError(source, f"{what} is not valid YAML{_error_position(exc)}") from None
    if node is None:
        return None
    _check_size(node, source, what)
    try:
        return yaml.SafeLoader("").construct_document(node)
    except yaml.YAMLError as exc:
        raise AdvisorInputError(source, f"{what} is not valid YAML{_error_position(exc)}") from None


def load_packaged_yaml(text: str):
    """A YAML file shipped with advisor (built-in rules, GPU facts) as Python data."""
    return yaml.load(text, Loader=PACKAGED_LOADER)  # a safe loader: plain data only


def _check_size(root: yaml.Node, source: str, what: str) -> None:
    """Count nodes as if every alias were expanded (a shared node counts each time it is
    reached) and measure nesting depth, without recursion."""
    count = 0
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise AdvisorInputError(
                source, f"{what} expands to more than {MAX_NODES:,} YAML nodes (alias bomb?)"
            )
        if depth > MAX_DEPTH:
            raise AdvisorInputError(source, f"{what} is nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))


def _error_position(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
    problem = getattr(exc, "problem", None)
    return f"{at}: {problem}" if problem else at
