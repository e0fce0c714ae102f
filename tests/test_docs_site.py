"""The documentation site (issue #38, item 1): ``mkdocs build --strict`` succeeds offline, its
reference covers every name of ``agentrag.__all__`` and every command of the CLI, the built pages
load nothing from another host, and the README links every page of the site's menu.

The code blocks of the pages run in tests/test_doc_blocks.py.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

README_MAX_LINES = 250


def _cli_commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command path under ``parser`` (``("db", "upgrade")``), walked here, not by the hook."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name)
                yield from _cli_commands(sub, (*path, name))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
        "NO_MKDOCS_2_WARNING": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"), "-d", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-6000:]}"
    return out


def test_the_api_reference_covers_every_public_name(site: Path) -> None:
    import agentrag

    page = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    missing = [name for name in agentrag.__all__ if f'id="agentrag.{name}"' not in page]
    assert not missing, f"not in the API reference: {missing}"
    # rendered from the docstring, not only named
    assert "PostgreSQL + pgvector behind a bounded connection pool" in page


def test_the_cli_reference_shows_every_commands_help(site: Path) -> None:
    import html

    from agentrag.cli import build_parser

    page = html.unescape((site / "reference" / "cli" / "index.html").read_text(encoding="utf-8"))
    commands = list(_cli_commands(build_parser()))
    assert ("db", "upgrade") in commands and ("serve",) in commands, commands
    missing = [c for c in commands if f'id="agentrag-{"-".join(c)}"' not in page]
    assert not missing, f"not in the CLI reference: {missing}"
    text = re.sub(r"<[^>]+>", "", page)
    no_usage = [c for c in commands if f"usage: agentrag {' '.join(c)}" not in text]
    assert not no_usage, f"no --help text for: {no_usage}"


def test_the_site_loads_nothing_from_another_host(site: Path) -> None:
    """Offline: no web font, script, style sheet or image from a CDN (Material's ``font: false``)."""
    remote = re.compile(r"""<(?:link|script|img|iframe)\b[^>]*\b(?:href|src)=["']?(?:https?:)?//""", re.I)
    offenders = {
        page.relative_to(site).as_posix(): remote.findall(page.read_text(encoding="utf-8"))
        for page in site.rglob("*.html")
    }
    offenders = {page: found for page, found in offenders.items() if found}
    assert not offenders, offenders
    css = "".join(p.read_text(encoding="utf-8") for p in site.rglob("*.css"))
    assert "fonts.googleapis" not in css and "fonts.gstatic" not in css


def _nav_pages(nav: Any) -> Iterator[str]:
    if isinstance(nav, str):
        yield nav
    elif isinstance(nav, list):
        for item in nav:
            yield from _nav_pages(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from _nav_pages(value)


_SNIPPET = re.compile(r'^--8<-- "([^"]+)"\s*$', re.M)


def test_the_readme_is_short_and_links_every_page_of_the_menu() -> None:
    import yaml

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_MAX_LINES
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    linked = set(re.findall(r"\]\(([^)#\s]+)", readme))
    unlinked = []
    for page in _nav_pages(config["nav"]):
        if page == "index.md":  # the README is the repository's home page
            continue
        source = (REPO / "docs" / page).read_text(encoding="utf-8")
        included = _SNIPPET.findall(source)  # a page that only includes a file: the file will do
        if f"docs/{page}" not in linked and not (included and set(included) <= linked):
            unlinked.append(page)
    assert not unlinked, f"README.md does not link: {unlinked}"
    broken = [link for link in linked if "://" not in link and not (REPO / link).exists()]
    assert not broken, f"README.md links to nothing: {broken}"


def test_the_hook_shows_tagged_blocks_with_their_language() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("agentrag_docs_hooks", REPO / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)

    page = type("Page", (), {"file": type("File", (), {"src_uri": "how-to/x.md"})()})()
    source = "```python needs-model\nx = 1\n```\n\n```sh server\nagentrag serve\n```\n\n"
    source += "```python\ny = 2\n```\n"
    shown = hooks.on_page_markdown(source, page, None, None)
    assert re.findall(r"^```(.*)$", shown, re.M) == ["python", "", "sh", "", "python", ""]
