"""Write the public surface of a real torch_xla wheel as data for the shim.

    pip download torch_xla==2.9.0 --no-deps -d /tmp/txla
    python tools/torch_xla_surface.py /tmp/txla/torch_xla-2.9.0-*.whl

reads the wheel as a zip (never installs or imports it) and writes
``shims/torch_xla/_internal/real_surface.py``: every public module (no path part
starting with ``_``, plus the private modules scripts and torch itself import:
``PRIVATE_USED``) with its public names, the wheel's name, version and sha256.
No source text is copied: names only.

A module's public names are its ``__all__`` when it has one; otherwise what it
defines at top level (functions, classes, assignments) whose name does not start
with ``_``, and, in a package's ``__init__``, what it imports by name from
torch_xla; a ``from X import *`` anywhere re-exports X's public names. Imported modules are
recorded in ``ALIASES`` (``torch_xla.tpu`` is ``torch_xla._internal.tpu``), and such a
module is listed too.
"""

from __future__ import annotations

import ast
import hashlib
import os
import pprint
import sys
import zipfile

# Private modules that user code or torch imports by name (issue 11).
PRIVATE_USED = ("torch_xla._internal.pjrt", "torch_xla._internal.tpu")
OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   "shims", "torch_xla", "_internal", "real_surface.py")


def _module_name(path: str) -> str:
    parts = path[:-3].split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_public(module: str) -> bool:
    return module in PRIVATE_USED or not any(p.startswith("_") for p in module.split("."))


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _dunder_all(tree: ast.Module) -> list[str] | None:
    names: list[str] | None = None
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value:
            value = ast.literal_eval(node.value)
            names = list(value) if isinstance(node, ast.Assign) or names is None else names + list(value)
    return names


def _top_level(body: list[ast.stmt], in_try: bool = False):
    """(statement, inside a try?) at top level, looking inside if/try blocks as an import runs them."""
    for node in body:
        if isinstance(node, ast.If):
            yield from _top_level(node.body + node.orelse, in_try)
        elif isinstance(node, ast.Try):
            yield from _top_level(node.body + node.orelse + node.finalbody, True)
        else:
            yield node, in_try


def _is_api_value(node: ast.Assign | ast.AnnAssign) -> bool:
    """Not a TypeVar, a logger, nor a probe inside a try (``dist = ...distribution('tensorflow')``)."""
    call = node.value
    if isinstance(call, ast.Call):
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name not in ("TypeVar", "getLogger")
    return True


def surface(wheel: str) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """(module -> {public name: kind}, "module.name" -> the module that name is)."""
    with zipfile.ZipFile(wheel) as zf:
        sources = {_module_name(n): (n.endswith("__init__.py"), zf.read(n))
                   for n in zf.namelist() if n.startswith("torch_xla/") and n.endswith(".py")}
    trees = {m: (pkg, ast.parse(src)) for m, (pkg, src) in sources.items()}
    memo: dict[str, dict[str, str]] = {}
    aliases: dict[str, str] = {}

    def names_of(module: str) -> dict[str, str]:
        if module in memo:
            return memo[module]
        memo[module] = {}
        is_package, tree = trees[module]
        found: dict[str, str] = {}
        for node, in_try in _top_level(tree.body):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found[node.name] = "function"
            elif isinstance(node, ast.ClassDef):
                found[node.name] = "class"
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and not in_try and _is_api_value(node):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    for name in target.elts if isinstance(target, ast.Tuple) else [target]:
                        if isinstance(name, ast.Name):  # not `torch._dynamo.config.x = ...`
                            found.setdefault(name.id, "value")
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(module, is_package, node)
                if not source.startswith("torch_xla"):
                    continue
                for alias in node.names:
                    if alias.name == "*":  # a re-export wherever it is
                        if source in trees:
                            found.update(names_of(source))
                        continue
                    if not is_package:
                        continue
                    name = alias.asname or alias.name
                    submodule = f"{source}.{alias.name}"
                    if submodule in trees:
                        found[name] = "module"
                        aliases[f"{module}.{name}"] = submodule
                    elif source in trees:
                        found[name] = names_of(source).get(alias.name, "value")
        declared = _dunder_all(tree)
        if declared is not None:
            result = {n: found.get(n, "value") for n in declared}
        else:
            result = {n: k for n, k in found.items() if not n.startswith("_")}
        memo[module] = result
        return result

    modules = {m: names_of(m) for m in sorted(trees) if _is_public(m)}
    aliases = {k: v for k, v in sorted(aliases.items()) if k.rsplit(".", 1)[0] in modules}
    for target in aliases.values():  # a public name that is a private module makes it public
        modules.setdefault(target, names_of(target))
    return dict(sorted(modules.items())), aliases


def main(wheel: str) -> None:
    with open(wheel, "rb") as f:
        sha256 = hashlib.sha256(f.read()).hexdigest()
    name = os.path.basename(wheel)
    version = name.split("-")[1]
    modules, aliases = surface(wheel)
    text = (
        f'"""The public surface of the real torch_xla {version}: generated by\n'
        'tools/torch_xla_surface.py from the wheel named below (names only, no source).\n'
        'Do not edit by hand; regenerate."""\n\n'
        "# ruff: noqa: E501\n\n"
        f"VERSION = {version!r}\n"
        f"WHEEL = {name!r}\n"
        f"SHA256 = {sha256!r}\n\n"
        "# module -> {public name: function | class | value | module}\n"
        f"MODULES: dict[str, dict[str, str]] = {pprint.pformat(modules, width=100, sort_dicts=True)}\n\n"
        "# 'module.name' -> the module that name is\n"
        f"ALIASES: dict[str, str] = {pprint.pformat(aliases, width=100, sort_dicts=True)}\n"
    )
    with open(OUT, "w") as f:
        f.write(text)
    total = sum(len(v) for v in modules.values())
    print(f"{OUT}: {len(modules)} modules, {total} public names, torch_xla {version}, sha256 {sha256}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
