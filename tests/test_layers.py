"""The architecture, enforced: ``codec/`` is a few packages in layers, and imports go one way.

Every import of a codec module -- at module level or inside a function -- goes to a module of
a lower layer or of its own layer, and no chain of imports comes back to where it started (no
module cycles, hidden in functions or not).  The layers, bottom to top, are :data:`LAYERS`;
the architecture page (docs/architecture.md) draws them.
"""
from __future__ import annotations

import ast
import pathlib
import subprocess
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: bottom to top: (layer, module prefixes); a module belongs to the layer of its longest prefix
LAYERS = [
    ("declarations", ["codec.schemas"]),
    ("errors and display", ["codec.errors", "codec.ui"]),
    ("engine", ["codec.engine"]),
    ("io", ["codec.io"]),
    ("reader model", ["codec.model"]),
    ("registry", ["codec.registry"]),
    ("formats", ["codec.formats"]),
    ("public API", ["codec", "codec.api", "codec.convert", "codec.compare", "codec.remote_file"]),
    ("testing", ["codec.testing", "codec.strategies"]),
    ("tools", ["codec.tools", "codec.__main__"]),
]


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for folder, prefix in ((ROOT / "codec", "codec"), (ROOT / "schemas", "codec.schemas")):
        for p in sorted(folder.rglob("*.py")):
            parts = p.relative_to(folder).with_suffix("").parts
            name = ".".join((prefix,) + parts)
            out[name[: -len(".__init__")] if name.endswith(".__init__") else name] = p
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def imports_of(name: str) -> set[str]:
    """The codec modules ``name`` imports, anywhere in its code (functions too)."""
    package = name if _is_package(name) else name.rpartition(".")[0]
    out = set()
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    for node in ast.walk(tree):  # (imports for type checkers only are not imports)
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING":
            node.body = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.add(sub if sub in MODULES else base)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "__import__" and node.args \
                and isinstance(node.args[0], ast.Constant):
            out.add(node.args[0].value)
    return {m for m in out if m in MODULES and m != name}


def layer_of(name: str) -> int:
    best = max(((len(p), i) for i, (_, prefixes) in enumerate(LAYERS) for p in prefixes
                if name == p or name.startswith(p + ".") and p != "codec"), default=None)
    if best is None:
        assert name in LAYERS[7][1], f"{name} is in no layer: add it to LAYERS (and the drawing in docs/architecture.md)"
        return 7
    return best[1]


def test_every_module_is_in_a_layer():
    for name in MODULES:
        layer_of(name)


def test_imports_go_down_the_layers():
    up = [f"{m} ({LAYERS[layer_of(m)][0]}) imports {d} ({LAYERS[layer_of(d)][0]})"
          for m in MODULES for d in sorted(imports_of(m)) if layer_of(d) > layer_of(m)]
    assert not up, "imports against the layers:\n" + "\n".join(up)


def test_no_import_cycles():
    graph = {m: imports_of(m) for m in MODULES}
    # a package's __init__ is run by importing any module inside it: that edge is implicit, not a cycle
    seen, on_path, cycles = set(), [], []

    def visit(m):
        seen.add(m)
        on_path.append(m)
        for d in sorted(graph[m]):
            if d in on_path:
                cycles.append(on_path[on_path.index(d):] + [d])
            elif d not in seen:
                visit(d)
        on_path.pop()

    for m in sorted(graph):
        if m not in seen:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_more_than_ten_modules_directly_in_codec_and_none_over_600_lines():
    top = sorted(p.name for p in (ROOT / "codec").glob("*.py"))
    assert len(top) <= 10, top
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "codec").rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600}
    assert not long, long


def test_every_package_folder_is_installed():
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {m for m in MODULES if _is_package(m)}
    assert declared == folders, (sorted(declared - folders), sorted(folders - declared))


def test_modelcodec_imports_beside_a_project_with_its_own_schemas_package(tmp_path):
    """The schemas are installed as ``codec.schemas``: a project's own ``schemas`` package (common in
    web and data projects) neither hides them nor is taken by modelcodec."""
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "__init__.py").write_text("MINE = True\n")
    code = ("import codec, schemas, io\n"
            "from codec.schemas import aero\n"
            "assert schemas.MINE and 'aero' in codec.schemas.FORMATS and aero.MAGIC == b'AERO'\n"
            "r = codec.open(codec.write('m.aero', {'w': __import__('numpy').arange(3.0)}))\n"
            "print(r.format, sorted(r.tensors))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{tmp_path}:{ROOT}"}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["aero", "['w']"]
