"""The import direction of agentrag's layers (drawn in ARCHITECTURE.md, "Layers"), and the house rules
a layout keeps: no module over 600 lines, no private name imported across modules.

A small AST check in the spirit of import-linter's layers contract: every module of
``agentrag/`` belongs to exactly one layer, and no import, at the top of a module or inside
a function, names a module in a higher layer. Modules of one layer may import each other.

Imports under ``if TYPE_CHECKING:`` are annotations only (no import happens at run time), so
they may name a higher layer (``Context.deps`` names the Store, the LLM, ...); they may not
name an extension package. The extension packages (``server``, ``integrations``,
``executors``) stand above everything and use only the public API: ``agentrag``,
``agentrag.errors``, ``agentrag.testing``, ``agentrag.chat`` and their own package, in
TYPE_CHECKING blocks too.

A private name (``_x``, not a dunder) is its module's own: ``from agentrag.a import _x`` in another
module fails, whatever the layers (give it a public name, or move it). A private *module*
(``agentrag._lazy``) is fine: its names are public to the package behind ``agentrag.__all__``.

Each check is itself tested on a small synthetic offender in a temporary tree.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "agentrag"

# Bottom to top. A module belongs to the layer of the longest prefix naming it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("agentrag.errors", "agentrag._lazy", "agentrag._renderers", "agentrag._resources",
              "agentrag._sansio", "agentrag._version", "agentrag._deprecation", "agentrag.hits",
              "agentrag.scope", "agentrag.telemetry")),
    ("context", ("agentrag.context",)),
    ("models", ("agentrag.llm", "agentrag.embedders", "agentrag.rerankers", "agentrag.prompts",
                "agentrag.grounding", "agentrag.sentences", "agentrag.audit", "agentrag.testing",
                "agentrag.readers")),
    ("retrieval", ("agentrag.retrieval", "agentrag.languages")),
    ("store", ("agentrag.store", "agentrag.querylog")),
    ("steps", ("agentrag.step", "agentrag.steps", "agentrag.proof", "agentrag.chat", "agentrag.evidence",
               "agentrag.extractive", "agentrag.abstain", "agentrag.focus", "agentrag.support",
               "agentrag.answer_languages", "agentrag.answer_curve", "agentrag.answer_types",
               "agentrag.answer_window",
               "agentrag.restated", "agentrag.unit_vectors", "agentrag.abstention", "agentrag.contrast",
               "agentrag.paraphrase", "agentrag.verbs", "agentrag.wordforms")),
    ("presentation", ("agentrag.display",)),
    ("application", ("agentrag", "agentrag.__main__", "agentrag.cli", "agentrag.demo", "agentrag.samples",
                     "agentrag.eval")),
]  # fmt: skip
EXTENSIONS = ("agentrag.server", "agentrag.integrations", "agentrag.executors")
# agentrag.chat: the public chat-turn module (RAGConfig, retrieve_turn, with_rag_context) that the
# LangGraph integration wraps, like agentrag.testing a public module outside agentrag.__all__.
PUBLIC_API = ("agentrag", "agentrag.errors", "agentrag.testing", "agentrag.chat")
MAX_LINES = 600


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the agentrag module it names
    line: int
    type_only: bool  # under `if TYPE_CHECKING:`


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _exists(module: str, root: Path = ROOT) -> bool:
    path = root.parent.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path, root: Path = ROOT) -> list[Import]:
    """Every agentrag import of a module: top level, in functions, in TYPE_CHECKING blocks."""
    module = module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[Import] = []

    def targets(node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            base = ".".join([*anchor, *([node.module] if node.module else [])])
        # `from agentrag import audit` names the module agentrag.audit, not the package's API
        return [f"{base}.{a.name}" if _exists(f"{base}.{a.name}", root) else base for a in node.names]

    def visit(node: ast.AST, type_only: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, type_only)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            for target in targets(node):
                if target == "agentrag" or target.startswith("agentrag."):
                    found.append(Import(module, target, node.lineno, type_only))
        for child in ast.iter_child_nodes(node):
            visit(child, type_only)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_of(module: str) -> int | None:
    """The index of the module's layer in LAYERS (None for an extension or an unknown module)."""
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if _under(module, prefix) and (best is None or len(prefix) > best[1]):
                best = (index, len(prefix))
    # "agentrag" only claims the package module itself, not everything below it
    if best is not None and LAYERS[best[0]][0] == "application" and best[1] == len("agentrag"):
        return best[0] if module == "agentrag" else None
    return None if best is None else best[0]


def extension_of(module: str) -> str | None:
    return next((e for e in EXTENSIONS if _under(module, e)), None)


def violations(paths: list[Path], root: Path = ROOT) -> list[str]:
    out: list[str] = []
    for path in paths:
        for imp in imports_of(path, root):
            where = f"{imp.module}:{imp.line} imports {imp.target}"
            own = extension_of(imp.module)
            if own is not None:
                if not (imp.target in PUBLIC_API or _under(imp.target, own)):
                    out.append(f"{where}: {own} may import only {', '.join(PUBLIC_API)} and itself")
                continue
            if extension_of(imp.target) is not None:
                out.append(f"{where}: nothing in the library imports an extension package")
                continue
            if imp.type_only:
                continue
            mine, theirs = layer_of(imp.module), layer_of(imp.target)
            assert mine is not None and theirs is not None, where
            if theirs > mine:
                out.append(f"{where}: layer {LAYERS[mine][0]} imports the higher layer {LAYERS[theirs][0]}")
    return out


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The module an ImportFrom names (relative imports resolved against ``module``)."""
    if not node.level:
        return node.module or ""
    package = module if is_package else module.rpartition(".")[0]
    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
    return ".".join([*anchor, *([node.module] if node.module else [])])


def private_imports(paths: list[Path], root: Path = ROOT) -> list[str]:
    """``from agentrag.m import _x`` anywhere in another module: a private name crossing a module."""
    out: list[str] = []
    for path in paths:
        module = module_name(path, root)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = _resolve(node, module, path.name == "__init__.py")
            if not (source == "agentrag" or source.startswith("agentrag.")):
                continue
            for alias in node.names:
                name = alias.name
                private = name.startswith("_") and not (name.startswith("__") and name.endswith("__"))
                if private and not _exists(f"{source}.{name}", root):  # a private module is fine
                    out.append(
                        f"{module}:{node.lineno} imports the private name {name} from {source}: "
                        "give it a public name (or keep it in its module)"
                    )
    return out


def long_modules(paths: list[Path], root: Path = ROOT) -> list[str]:
    """Modules over MAX_LINES lines: split them by responsibility."""
    out = []
    for path in paths:
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            out.append(
                f"{module_name(path, root)}: {lines} lines (at most {MAX_LINES}): split it by responsibility"
            )
    return out


def library_files() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def test_every_module_has_a_layer() -> None:
    unplaced = [
        module_name(p)
        for p in library_files()
        if layer_of(module_name(p)) is None and extension_of(module_name(p)) is None
    ]
    assert unplaced == [], f"give these modules a layer here and in ARCHITECTURE.md: {unplaced}"


def test_no_import_runs_up_the_layers() -> None:
    assert violations(library_files()) == []


def test_no_private_name_is_imported_across_modules() -> None:
    assert private_imports(library_files()) == []


def test_no_module_is_over_600_lines() -> None:
    assert long_modules(library_files()) == []


def test_context_imports_nothing_above_it() -> None:
    path = ROOT / "context.py"
    runtime = {imp.target for imp in imports_of(path) if not imp.type_only}
    assert runtime <= {"agentrag.errors", "agentrag.hits", "agentrag.scope", "agentrag._renderers"}, runtime


def test_architecture_md_draws_the_same_layers() -> None:
    text = (ROOT.parent / "ARCHITECTURE.md").read_text(encoding="utf-8")
    drawing = text.split("<!-- layers -->")[1]
    for name, prefixes in LAYERS:
        line = next((row for row in drawing.splitlines() if row.strip().startswith(f"{name}:")), None)
        assert line is not None, f"ARCHITECTURE.md does not draw layer {name}"
        for prefix in prefixes:
            short = prefix.removeprefix("agentrag.") if prefix != "agentrag" else "agentrag"
            assert short in line, f"ARCHITECTURE.md's {name} layer does not list {short}"
    rows = [row.split(":")[0].strip() for row in drawing.splitlines() if ":" in row]
    drawn = [row for row in rows if row in {name for name, _ in LAYERS}]
    assert drawn == [name for name, _ in reversed(LAYERS)], "ARCHITECTURE.md draws the layers top first"
    for extension in EXTENSIONS:
        assert extension.removeprefix("agentrag.") in drawing


# ---- the checker itself catches what it must ----------------------------------------------
@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        ("agentrag/retrieval/x.py", "def f():\n    from agentrag.store.store import Store\n", "layer store"),
        ("agentrag/context.py", "import agentrag.steps\n", "higher layer steps"),
        ("agentrag/hits.py", "from agentrag import audit\n", "higher layer models"),
        ("agentrag/server/app.py", "from agentrag.store.store import Store\n", "may import only"),
        (
            "agentrag/server/app.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from agentrag.context import Context\n",
            "may import only",
        ),
        ("agentrag/steps/x.py", "from agentrag.integrations import graph\n", "extension package"),
    ],
)
def test_the_checker_catches_upward_imports(
    module: str, source: str, expected: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = ROOT.parent / module
    original = Path.read_text

    def read_text(self: Path, *args: object, **kwargs: object) -> str:
        return source if self == path else original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", read_text)
    found = violations([path])
    assert len(found) == 1 and expected in found[0], found


def test_the_checker_allows_what_the_policy_allows(monkeypatch: pytest.MonkeyPatch) -> None:
    cases = {
        ROOT / "server" / "app.py": "import agentrag\nfrom agentrag.errors import StoreError\n"
        "from agentrag.testing import FakeLLM\nfrom agentrag.server import routes\n",
        ROOT / "context.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from agentrag.store.store import Store\n",
        ROOT / "store" / "x.py": "def f():\n    from agentrag.retrieval.search import search\n",
    }
    original = Path.read_text

    def read_text(self: Path, *args: object, **kwargs: object) -> str:
        return cases[self] if self in cases else original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", read_text)
    assert violations(list(cases)) == []


def _tree(tmp_path: Path, files: dict[str, str]) -> tuple[Path, list[Path]]:
    """A synthetic ``agentrag/`` package under tmp_path: its root and its files."""
    root = tmp_path / "agentrag"
    paths = []
    for name, source in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.parent != root and not (path.parent / "__init__.py").exists():
            (path.parent / "__init__.py").write_text("", encoding="utf-8")
        path.write_text(source, encoding="utf-8")
        paths.append(path)
    return root, paths


def test_the_line_check_catches_a_long_module(tmp_path: Path) -> None:
    root, paths = _tree(
        tmp_path,
        {"long.py": "x = 1\n" * (MAX_LINES + 1), "fits.py": "x = 1\n" * MAX_LINES},
    )
    assert long_modules(paths, root) == [
        f"agentrag.long: {MAX_LINES + 1} lines (at most {MAX_LINES}): split it by responsibility"
    ]


def test_the_private_check_catches_a_private_import(tmp_path: Path) -> None:
    root, paths = _tree(
        tmp_path,
        {
            "a.py": "_helper = 1\n",
            "_lazy.py": "def lazy(): ...\n",
            "pkg/inner.py": "_x = 1\n",
            "b.py": "from agentrag.a import _helper\n",
            "pkg/c.py": "def f():\n    from .inner import _x\n",
            "fine.py": (
                "from agentrag import _lazy\nfrom agentrag._lazy import lazy\n"
                "from agentrag.a import __doc__\n"
            ),
        },
    )
    found = private_imports(paths, root)
    assert len(found) == 2, found
    assert found[0].startswith("agentrag.b:1 imports the private name _helper from agentrag.a")
    assert found[1].startswith("agentrag.pkg.c:2 imports the private name _x from agentrag.pkg.inner")


def test_the_layer_check_catches_an_upward_import_in_a_tree(tmp_path: Path) -> None:
    root, paths = _tree(
        tmp_path,
        {
            "retrieval/result.py": "def show():\n    from agentrag.display import render\n",
            "display/__init__.py": "from agentrag.retrieval import result\n",
        },
    )
    found = violations(paths, root)
    assert found == [
        "agentrag.retrieval.result:2 imports agentrag.display: "
        "layer retrieval imports the higher layer presentation"
    ]


# ---- the seam: agentrag.steps binds the methods Context declares -------------------------------
def test_the_seam_binds_what_context_declares() -> None:
    code = (
        "from agentrag.context import BOUND_METHODS, Context\n"
        "try:\n"
        "    Context('q').route\n"
        "except AttributeError as exc:\n"
        "    print('before:', 'agentrag.steps' in str(exc))\n"
        "import agentrag\n"
        "assert agentrag.Context is Context\n"
        "print('after:', all(callable(getattr(Context('q'), name)) for name in BOUND_METHODS))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["before:", "True", "after:", "True"]
