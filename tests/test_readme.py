"""The README works as written (issue #13, item 4): every Python and shell block runs, in order.

Python blocks run in one namespace (as a reader pasting them into one session would), shell
blocks through ``bash -e`` with ``.venv/bin/`` meaning this interpreter's bin directory; both in
the repository, against a fresh database of their own (``AGENTRAG_DATABASE_URL``). Blocks tagged
``sh setup`` install things or run the suite itself, so they are checked instead of run: every
``make`` target dry-runs (``make -n``), every extra a ``pip install`` names exists in
pyproject.toml, its torch pin is constraints.txt's, and every path they name exists. Blocks
tagged ``sh server`` talk to a long-running ``agentrag serve`` (tested as a real process by the
server's own tests), and ``sh bench`` blocks run for minutes on the benchmark data: both must
parse (``bash -n``) and every ``agentrag`` command in them must exist (``--help`` succeeds).
``python needs-model`` blocks name a model or hosted service the repository does not ship (a
cross-encoder, a reranking API): they are compiled, not run; the rerankers' own tests run the
same calls on a tiny model built in the test and a local stub.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

README = REPO / "README.md"
_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)


def readme_blocks() -> list[tuple[str, str, int]]:
    """``(info string, code, line)`` of every fenced block with a language."""
    text = README.read_text(encoding="utf-8")
    out = []
    for match in _FENCE.finditer(text):
        info = match.group(1).strip()
        if info:
            out.append((info, match.group(2), text.count("\n", 0, match.start()) + 1))
    return out


def test_the_readme_has_the_blocks_we_run() -> None:
    kinds = [info for info, _, _ in readme_blocks()]
    assert set(kinds) <= {"python", "python needs-model", "sh", "sh setup", "sh server", "sh bench"}, kinds
    assert kinds.count("python") >= 8 and kinds.count("sh") >= 2 and kinds.count("sh setup") >= 3


def _bin() -> Path:
    return Path(sys.executable).parent


def _check_setup_block(code: str, line: int) -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    extras = set(pyproject["project"]["optional-dependencies"])
    constraints = (REPO / "constraints.txt").read_text()
    for command in (c for raw in code.splitlines() for c in raw.split("#")[0].split("&&")):
        words = shlex.split(command)
        if not words:
            continue
        where = f"README line {line}: {command.strip()!r}"
        if words[0] == "make":
            for target in words[1:]:
                dry = subprocess.run(["make", "-n", target], cwd=REPO, capture_output=True, text=True)
                assert dry.returncode == 0, f"{where}: make -n {target}: {dry.stderr}"
        elif words[0] == "source":
            assert words[1] == ".venv/bin/activate" and (_bin() / "activate").exists(), where
        elif words[0].endswith("pip") or words[:3] == [sys.executable, "-m", "pip"]:
            assert words[1] == "install", where
            for word in words[2:]:
                if word.startswith(".[") or word.startswith("-e"):
                    continue
                if "==" in word:
                    assert word in constraints, f"{where}: {word} is not the pin in constraints.txt"
            for spec in re.findall(r"\.\[([^\]]+)\]", command):
                unknown = set(spec.split(",")) - extras
                assert not unknown, f"{where}: no extra {unknown} in pyproject.toml"
            if "-c" in words:
                assert (REPO / words[words.index("-c") + 1]).exists(), where
        elif words[0].startswith(".venv/bin/"):
            assert words[-1].endswith("/") and (REPO / words[-1]).is_dir(), where
        else:
            raise AssertionError(f"{where}: no check for this command")


def _check_server_block(code: str, line: int, env: dict[str, str]) -> None:
    parsed = subprocess.run(["bash", "-n", "-c", code], capture_output=True, text=True)
    assert parsed.returncode == 0, f"README line {line}: {parsed.stderr}"
    for command in code.replace("\\\n", " ").splitlines():
        words = [w for w in shlex.split(command.split("#")[0]) if "=" not in w or w.startswith("-")]
        if words and words[0] == "agentrag":
            verb = [w for w in words[1:3] if not w.startswith("-")][:2]
            if verb and verb[0] in ("serve",):
                verb = verb[:1]
            done = subprocess.run(
                [str(_bin() / "agentrag"), *verb, "--help"], env=env, capture_output=True, text=True
            )
            assert done.returncode == 0, f"README line {line}: agentrag {' '.join(verb)}: {done.stderr}"


@pytest.fixture
def readme_database(database_url: str) -> Iterator[str]:
    """A database of its own on the suite's server: the README names its collections plainly
    ("docs", "support"), which other tests may use in the session's database."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"agentrag_readme_{uuid.uuid4().hex[:10]}"
    admin = create_engine(make_url(database_url), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(database_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.mark.slow
def test_every_readme_block_runs_as_written(readme_database: str, monkeypatch: pytest.MonkeyPatch) -> None:
    database_url = readme_database
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("AGENTRAG_DATABASE_URL", database_url)
    monkeypatch.delenv("AGENTRAG_LLM", raising=False)
    env = {**os.environ, "AGENTRAG_DATABASE_URL": database_url}
    namespace: dict[str, Any] = {"__name__": "readme"}
    ran = {"python": 0, "python needs-model": 0, "sh": 0, "sh setup": 0, "sh server": 0, "sh bench": 0}
    try:
        for info, code, line in readme_blocks():
            ran[info] += 1
            if info == "python":
                try:
                    exec(compile(code, f"README.md:{line}", "exec"), namespace)
                except Exception as exc:
                    raise AssertionError(f"the Python block at README line {line} failed: {exc!r}") from exc
            elif info == "python needs-model":  # a model or hosted service the repo does not ship
                compile(code, f"README.md:{line}", "exec")
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
                assert done.returncode == 0, (
                    f"README line {line}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
                )
            elif info in ("sh server", "sh bench"):
                _check_server_block(code, line, env)
            else:
                _check_setup_block(code, line)
        assert ran["python"] >= 8 and ran["sh"] >= 2
        # what the blocks left behind is what the README says
        store = namespace["store"]
        assert {"docs", "support", "drafts", "beir_mini"} <= {c.name for c in store.collections()}
        answered = namespace["answered"]
        assert answered["mode"] == "full" and answered["grounded"] is True and "[chk_" in answered["answer"]
    finally:
        for value in namespace.values():
            if type(value).__name__ == "Store":
                value.close()


def test_the_permissions_section_prints_what_it_says(readme_database: str, fake_embedder: Any) -> None:
    """README "Permissions": its block run alone, each ``print`` compared with the comment under it
    (as sets: the comment's order is the score's)."""
    import ast
    import io
    from contextlib import redirect_stdout

    import agentrag as ar

    text = README.read_text(encoding="utf-8")
    section = text.index("\n## Permissions\n")
    code = next(m.group(2) for m in _FENCE.finditer(text, section) if m.group(1).strip() == "python")
    said = [ast.literal_eval(c.split("  (")[0]) for c in re.findall(r"^print\(.*\)\n# (.*)$", code, re.M)]
    assert len(said) == 2, said
    store = ar.Store(readme_database, embedder=fake_embedder)
    out = io.StringIO()
    try:
        with redirect_stdout(out):
            exec(compile(code, "README.md (Permissions)", "exec"), {"ar": ar, "store": store})
    finally:
        store.close()
    printed = [ast.literal_eval(line) for line in out.getvalue().splitlines()]
    assert [sorted(p) for p in printed] == [sorted(s) for s in said]
