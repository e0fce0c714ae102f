"""The documentation works as written (issue #13, item 4; issue #38, item 1): every Python and shell
block of README.md and of every page under docs/ runs, in order, page by page.

The Python blocks of one page run in one namespace (as a reader pasting them into one session
would), shell blocks through ``bash -e`` with ``.venv/bin/`` meaning this interpreter's bin
directory; both in the repository, against a fresh database of the page's own
(``AGENTRAG_DATABASE_URL``, a copy of one migrated template). The local model's vectors are
memoized across pages by (model, version, backend, text): pages ingest the same sample corpus, which
the run embeds once (the vectors are the model's own; shell blocks run the CLI, which embeds for
itself). Blocks tagged ``sh setup`` install
things or run the suite itself, so they are checked instead of run: every ``make`` target dry-runs
(``make -n``), every extra a ``pip install`` names exists in pyproject.toml, its torch pin is
constraints.txt's, and every path they name exists. Blocks tagged ``sh server`` talk to a
long-running ``agentrag serve`` (tested as a real process by the server's own tests), and
``sh bench`` blocks run for minutes on the benchmark data: both must parse (``bash -n``) and every
``agentrag`` command in them must exist (``--help`` succeeds). ``python needs-model`` blocks name a
model or hosted service the repository does not ship (a cross-encoder, a reranking API): they are
compiled, not run; the rerankers' own tests run the same calls on a tiny model built in the test and
a local stub. ``text`` blocks are shown, not run; ``json`` blocks must parse. The site's build
(docs/hooks.py) shows the tagged blocks with their plain language.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

README = REPO / "README.md"
DOCS = REPO / "docs"
_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
RUN = {"python", "sh"}
CHECKED = {"python needs-model", "sh setup", "sh server", "sh bench"}
SHOWN = {"text", "json"}


def doc_pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def page_name(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


def page_blocks(page: Path) -> list[tuple[str, str, int]]:
    """``(info string, code, line)`` of every fenced block with a language."""
    text = page.read_text(encoding="utf-8")
    out = []
    for match in _FENCE.finditer(text):
        info = match.group(1).strip()
        if info:
            out.append((info, match.group(2), text.count("\n", 0, match.start()) + 1))
    return out


def readme_blocks() -> list[tuple[str, str, int]]:
    return page_blocks(README)


def test_every_page_has_only_blocks_we_run() -> None:
    counts: dict[str, int] = {}
    for page in doc_pages():
        for info, code, line in page_blocks(page):
            assert info in RUN | CHECKED | SHOWN, f"{page_name(page)} line {line}: a block of kind {info!r}"
            counts[info] = counts.get(info, 0) + 1
            if info == "json":
                json.loads(code)
    assert counts["python"] >= 8 and counts["sh"] >= 2 and counts["sh setup"] >= 3, counts
    readme = [info for info, _, _ in readme_blocks()]
    assert "python" in readme and "sh setup" in readme, readme


def _bin() -> Path:
    return Path(sys.executable).parent


def _check_setup_block(code: str, where: str) -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    extras = set(pyproject["project"]["optional-dependencies"])
    constraints = (REPO / "constraints.txt").read_text()
    for command in (c for raw in code.splitlines() for c in raw.split("#")[0].split("&&")):
        words = shlex.split(command)
        if not words:
            continue
        said = f"{where}: {command.strip()!r}"
        if words[0] == "make":
            for target in words[1:]:
                dry = subprocess.run(["make", "-n", target], cwd=REPO, capture_output=True, text=True)
                assert dry.returncode == 0, f"{said}: make -n {target}: {dry.stderr}"
        elif words[0] == "source":
            assert words[1] == ".venv/bin/activate" and (_bin() / "activate").exists(), said
        elif words[0].endswith("pip") or words[:3] == [sys.executable, "-m", "pip"]:
            assert words[1] == "install", said
            for word in words[2:]:
                if word.startswith(".[") or word.startswith("-e"):
                    continue
                if "==" in word:
                    assert word in constraints, f"{said}: {word} is not the pin in constraints.txt"
            for spec in re.findall(r"\.\[([^\]]+)\]", command):
                unknown = set(spec.split(",")) - extras
                assert not unknown, f"{said}: no extra {unknown} in pyproject.toml"
            if "-c" in words:
                assert (REPO / words[words.index("-c") + 1]).exists(), said
        elif words[0].startswith(".venv/bin/"):
            assert words[-1].endswith("/") and (REPO / words[-1]).is_dir(), said
        else:
            raise AssertionError(f"{said}: no check for this command")


def _check_server_block(code: str, where: str, env: dict[str, str]) -> None:
    parsed = subprocess.run(["bash", "-n", "-c", code], capture_output=True, text=True)
    assert parsed.returncode == 0, f"{where}: {parsed.stderr}"
    for command in code.replace("\\\n", " ").splitlines():
        words = [w for w in shlex.split(command.split("#")[0]) if "=" not in w or w.startswith("-")]
        if words and words[0] == "agentrag":
            verb = [w for w in words[1:3] if not w.startswith("-")][:2]
            if verb and verb[0] in ("serve",):
                verb = verb[:1]
            done = subprocess.run(
                [str(_bin() / "agentrag"), *verb, "--help"], env=env, capture_output=True, text=True
            )
            assert done.returncode == 0, f"{where}: agentrag {' '.join(verb)}: {done.stderr}"


def _create_database(admin_url: str, name: str, template: str | None = None) -> None:
    from sqlalchemy import create_engine, text

    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            copy = f' TEMPLATE "{template}"' if template else ""
            conn.execute(text(f'CREATE DATABASE "{name}"{copy}'))
    finally:
        admin.dispose()


def _drop_database(admin_url: str, name: str) -> None:
    from sqlalchemy import create_engine, text

    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@pytest.fixture(scope="module")
def migrated_template(database_url: str) -> Iterator[str]:
    """A database with the schema and nothing else, copied for each page (migrating once)."""
    from sqlalchemy.engine import make_url

    import agentrag as ar
    from agentrag.testing import FakeEmbedder

    name = f"agentrag_docs_template_{uuid.uuid4().hex[:10]}"
    _create_database(database_url, name)
    url = make_url(database_url).set(database=name).render_as_string(hide_password=False)
    store = ar.Store(url, embedder=FakeEmbedder(dimensions=8))
    try:
        store.collections()  # the first use applies the migrations
    finally:
        store.close()
    try:
        yield name
    finally:
        _drop_database(database_url, name)


@pytest.fixture
def page_database(database_url: str, migrated_template: str) -> Iterator[str]:
    """A database of the page's own on the suite's server: pages name their collections plainly
    ("docs", "support"), which other tests may use in the session's database."""
    from sqlalchemy.engine import make_url

    name = f"agentrag_docs_{uuid.uuid4().hex[:10]}"
    _create_database(database_url, name, template=migrated_template)
    try:
        yield make_url(database_url).set(database=name).render_as_string(hide_password=False)
    finally:
        _drop_database(database_url, name)


# What some pages' blocks leave behind is what those pages say.
def _after_first_answer(namespace: dict[str, Any]) -> None:
    assert {"docs", "support"} <= {c.name for c in namespace["store"].collections()}
    assert namespace["ctx"].citations and namespace["ctx"].grounded


def _after_chatbot(namespace: dict[str, Any]) -> None:
    answered = namespace["answered"]
    assert answered["mode"] == "full" and answered["grounded"] is True and "[chk_" in answered["answer"]


def _after_readme(namespace: dict[str, Any]) -> None:
    assert namespace["ctx"].citations, "the README's example answers with citations"


AFTER: dict[str, Callable[[dict[str, Any]], None]] = {
    "README.md": _after_readme,
    "docs/tutorials/first-answer.md": _after_first_answer,
    "docs/tutorials/chatbot-backend.md": _after_chatbot,
}


_VECTORS: dict[tuple[str, str, str, str], Any] = {}


def _memoized(encode: Callable[..., Any]) -> Callable[..., Any]:
    """``LocalEmbedder._encode`` that embeds each (model, version, backend, text) once per run."""
    import numpy as np

    def memoized(self: Any, backend: str, batch_size: int, texts: Sequence[str]) -> Any:
        keys = [(self.model_id, str(self.version), backend, text) for text in texts]
        todo = list(dict.fromkeys(k for k in keys if k not in _VECTORS))
        if todo:
            for key, vector in zip(
                todo, encode(self, backend, batch_size, [k[3] for k in todo]), strict=True
            ):
                _VECTORS[key] = vector
        if not keys:
            return encode(self, backend, batch_size, texts)
        return np.stack([_VECTORS[k] for k in keys]).astype(np.float32)

    return memoized


def _pages_with_blocks() -> list[Path]:
    return [page for page in doc_pages() if page_blocks(page)]


@pytest.mark.slow
@pytest.mark.parametrize("page", _pages_with_blocks(), ids=page_name)
def test_every_block_of_the_page_runs_as_written(
    page: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = page_blocks(page)
    runs = any(info in RUN for info, _, _ in blocks)
    database_url = request.getfixturevalue("page_database") if runs else "postgresql://unused/none"
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("AGENTRAG_DATABASE_URL", database_url)
    monkeypatch.delenv("AGENTRAG_LLM", raising=False)
    from agentrag.embedders import LocalEmbedder

    monkeypatch.setattr(LocalEmbedder, "_encode", _memoized(LocalEmbedder._encode))
    env = {**os.environ, "AGENTRAG_DATABASE_URL": database_url}
    namespace: dict[str, Any] = {"__name__": "docs_page"}
    name = page_name(page)
    from agentrag.readers import registry

    # a page may register a reader (docs/how-to/new-format.md): the process's registry is as it was after it
    saved = [(table, dict(table)) for table in (registry.READERS, registry._BY_SUFFIX)]
    try:
        for info, code, line in blocks:
            where = f"{name} line {line}"
            _run_block(info, code, where, namespace, env)
        if name in AFTER:
            AFTER[name](namespace)
    finally:
        for table, entries in saved:
            table.clear()
            table.update(entries)
        for value in namespace.values():
            if type(value).__name__ == "Store":
                value.close()


def _run_block(info: str, code: str, where: str, namespace: dict[str, Any], env: dict[str, str]) -> None:
    if info == "python":
        try:
            exec(compile(code, where, "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"the Python block at {where} failed: {exc!r}") from exc
    elif info == "python needs-model":  # a model or hosted service the repo does not ship
        compile(code, where, "exec")
    elif info == "sh":
        script = code.replace(".venv/bin/", f"{_bin()}/")
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, f"{where}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    elif info in ("sh server", "sh bench"):
        _check_server_block(code, where, env)
    elif info == "sh setup":
        _check_setup_block(code, where)


PERMISSIONS = DOCS / "how-to" / "permissions.md"


def test_the_permissions_example_prints_what_it_says(page_database: str, fake_embedder: Any) -> None:
    """docs/how-to/permissions.md "An example": its block run alone, each ``print`` compared with
    the comment under it (as sets: the comment's order is the score's)."""
    import ast
    import io
    from contextlib import redirect_stdout

    import agentrag as ar

    text = PERMISSIONS.read_text(encoding="utf-8")
    section = text.index("\n## An example\n")
    code = next(m.group(2) for m in _FENCE.finditer(text, section) if m.group(1).strip() == "python")
    said = [ast.literal_eval(c.split("  (")[0]) for c in re.findall(r"^print\(.*\)\n# (.*)$", code, re.M)]
    assert len(said) == 2, said
    store = ar.Store(page_database, embedder=fake_embedder)
    out = io.StringIO()
    try:
        with redirect_stdout(out):
            exec(compile(code, "docs/how-to/permissions.md (An example)", "exec"), {"ar": ar, "store": store})
    finally:
        store.close()
    printed = [ast.literal_eval(line) for line in out.getvalue().splitlines()]
    assert [sorted(p) for p in printed] == [sorted(s) for s in said]
