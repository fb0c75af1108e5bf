"""Reading a scenario file: bounded YAML, refused with the file and the line.

A scenario file is small, hand-written YAML. Anything else -- bytes that are not
UTF-8, a binary file, a document larger than ``MAX_BYTES``, nesting deeper than
``MAX_DEPTH``, aliases that expand past ``MAX_NODES`` (billion laughs), keys that
are not strings or are written twice, integers no machine word holds -- is a
``ScenarioError`` naming the file and the line, never a traceback.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import ComposerError

from harness.inputs import InputError, read_text

MAX_BYTES = 1 << 20
MAX_DEPTH = 32
MAX_NODES = 100_000
#: The widest integer a file may hold (a signed 64-bit word).
MAX_INT = 2**63 - 1

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_INTS = yaml.constructor.SafeConstructor()


class ScenarioError(InputError):
    """A scenario file (or an expected-differences file) that cannot be used: where, and
    what is wrong."""

    label = "scenario error"


class _Loader(yaml.SafeLoader):
    """The safe loader with its nesting bounded: PyYAML composes recursively."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels",
                                    self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def read_yaml(path: str, what: str = "a scenario file") -> tuple[yaml.Node | None, Any]:
    """The file's YAML node tree (for line numbers) and its plain data; ``what`` names
    the file in a refusal."""
    text = _read_text(path, what)
    try:
        loader = _Loader(text)
        try:
            root = loader.get_single_node()
            if root is not None:
                _check_tree(path, root)
            data = loader.construct_document(root) if root is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = " ".join(filter(None, (exc.context, exc.problem))) or "malformed"
        raise ScenarioError(path, f"not valid YAML: {problem}",
                            line=mark.line + 1 if mark else None) from None
    except yaml.reader.ReaderError as exc:
        line = text[:exc.position].count("\n") + 1
        raise ScenarioError(path, "not valid YAML: unacceptable character "
                            f"#x{exc.character:04x} (a binary file?)", line=line) from None
    except yaml.YAMLError as exc:
        raise ScenarioError(path, f"not valid YAML: {exc}") from None
    return root, data


def node_at(node: yaml.Node | None, loc: tuple[Any, ...]) -> yaml.Node | None:
    """The YAML node a pydantic error location points at (or its nearest parent): how a
    model's error becomes a line of the file (scenario files, expected-differences files)."""
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            pair = next(((k, v) for k, v in node.value if k.value in (key, str(key))), None)
            if pair is None:
                return node
            # An alias's value was written earlier, at its anchor: point at the key.
            node = pair[1] if pair[1].start_mark.index > pair[0].start_mark.index else pair[0]
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
        else:
            break
    return node


def _read_text(path: str, what: str) -> str:
    """The file's text: a regular file of at most ``MAX_BYTES`` (small, hand-written
    YAML), in UTF-8."""
    try:
        return read_text(path, MAX_BYTES, what)
    except InputError as exc:
        raise ScenarioError(exc.file, exc.message, exc.line) from None


def _check_tree(path: str, root: yaml.Node) -> None:
    """Keys are distinct strings and integers fit a word, over at most ``MAX_NODES``
    nodes counted as aliases expand them (so a cycle or an explosion stops early)."""
    seen = 0
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        seen += 1
        line = node.start_mark.line + 1
        if seen > MAX_NODES or depth > MAX_DEPTH:
            why = f"more than {MAX_NODES} values" if seen > MAX_NODES else \
                f"nested deeper than {MAX_DEPTH} levels"
            raise ScenarioError(path, f"{why} once aliases are expanded", line=line)
        if isinstance(node, yaml.MappingNode):
            keys: set[str] = set()
            for key, value in node.value:
                key_line = key.start_mark.line + 1
                if not isinstance(key, yaml.ScalarNode) or key.tag != _STR:
                    shown = key.value if isinstance(key, yaml.ScalarNode) else "a collection"
                    raise ScenarioError(path, f"key {shown!r} is not a string (quote it)",
                                        line=key_line)
                if key.value in keys:
                    raise ScenarioError(path, f"key {key.value!r} is written twice",
                                        line=key_line)
                keys.add(key.value)
                stack.append((value, depth + 1))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, depth + 1) for item in node.value)
        elif node.tag == _INT:
            _check_int(path, node, line)


def _check_int(path: str, node: yaml.ScalarNode, line: int) -> None:
    digits = node.value.replace("_", "").lstrip("+-")
    if len(digits) > 64:  # decide before converting: int() of a huge literal is slow
        raise ScenarioError(path, f"integer {node.value[:20]}... is too large", line=line)
    value = _INTS.construct_yaml_int(node)
    if abs(value) > MAX_INT:
        raise ScenarioError(path, f"integer {node.value} is outside -2**63..2**63-1", line=line)
