"""MkDocs hooks of the documentation site (mkdocs.yml ``hooks:``), run at build time, in-process.

* ``reference/cli.md``: the marker ``<!-- generated: cli-help -->`` becomes every command's own
  ``--help`` text, from the parser ``agentrag`` runs (extension commands included), so the page
  cannot drift from the CLI.
* ``reference/api.md``: the marker ``<!-- generated: api-reference -->`` becomes one mkdocstrings
  directive per name of ``agentrag.__all__``, grouped by what it is; mkdocstrings renders each
  from its docstring.
* Every page: the block tags the test suite reads (``python needs-model``, ``sh setup``,
  ``sh server``, ``sh bench``: tests/test_doc_blocks.py) are dropped from the fence, leaving the
  language for the highlighter.
* The API page's HTML: Sphinx roles left in docstrings (``:class:`Context```) show as code.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Iterator
from typing import Any

CLI_MARKER = "<!-- generated: cli-help -->"
API_MARKER = "<!-- generated: api-reference -->"
HELP_COLUMNS = "100"

_TAGGED_FENCE = re.compile(r"^```(python|sh) (?:setup|server|bench|needs-model)[ \t]*$", re.MULTILINE)
_SPHINX_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj|py:\w+):(?=<code>)")

# Where a public name comes from decides its section of the API page (agentrag._LAZY's modules).
_API_SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Pipeline", ("agentrag.steps", "agentrag.step", "agentrag.context")),
    ("Store, ingestion and retrieval", ("agentrag.store", "agentrag.hits", "agentrag.scope",
                                        "agentrag.retrieval", "agentrag.samples")),
    ("Models, prompts and telemetry", ("agentrag.embedders", "agentrag.rerankers", "agentrag.llm",
                                       "agentrag.prompts", "agentrag.telemetry")),
    ("Errors", ("agentrag.errors",)),
)  # fmt: skip
_OTHER_SECTION = "More"
_DOCSTRING_ONLY = "    options:\n      show_root_heading: false\n      members: false\n"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    markdown = _TAGGED_FENCE.sub(r"```\1", markdown)
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_reference())
    if API_MARKER in markdown:
        markdown = markdown.replace(API_MARKER, api_reference())
    return markdown


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri == "reference/api.md":
        html = _SPHINX_ROLE.sub("", html)
    return html


# --- the command line -----------------------------------------------------------------------


Command = tuple[tuple[str, ...], argparse.ArgumentParser]


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[Command]:
    """``(("db", "upgrade"), parser)`` for every command and group under ``parser``, depth first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) in seen:  # an alias: the same parser again
                    continue
                seen.add(id(sub))
                yield (*path, name), sub
                yield from commands(sub, (*path, name))


def cli_reference() -> str:
    from agentrag.cli import build_parser

    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS  # argparse wraps to the terminal: fix it for the page
    try:
        parser = build_parser()
        parts = [_help_section(("agentrag",), parser, level=2)]
        for path, sub in commands(parser):
            parts.append(_help_section(("agentrag", *path), sub, level=min(2 + len(path) - 1, 4)))
    finally:
        if saved is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved
    return "\n".join(parts)


def _help_section(words: tuple[str, ...], parser: argparse.ArgumentParser, level: int) -> str:
    anchor = "-".join(words)
    text = parser.format_help().rstrip()
    return f"{'#' * level} `{' '.join(words)}` {{#{anchor}}}\n\n```text\n{text}\n```\n"


# --- the Python API -------------------------------------------------------------------------


def api_sections() -> dict[str, list[str]]:
    """Every name of ``agentrag.__all__`` under its section, in the order ``_LAZY`` lists them
    (errors in ``agentrag.errors``' order), anything new under "More"."""
    import agentrag
    import agentrag.errors

    lazy: dict[str, str] = agentrag._LAZY
    errors = [n for n in vars(agentrag.errors) if n in agentrag.__all__]
    order = [*lazy, *errors, *sorted(agentrag.__all__)]
    origin = {**{n: "agentrag.errors" for n in errors}, **lazy}
    sections: dict[str, list[str]] = {title: [] for title, _ in _API_SECTIONS}
    sections[_OTHER_SECTION] = []
    for name in dict.fromkeys(order):
        if name not in agentrag.__all__:
            continue
        sections[_section_of(origin.get(name, ""))].append(name)
    return {title: names for title, names in sections.items() if names}


def _section_of(module: str) -> str:
    for title, prefixes in _API_SECTIONS:
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return title
    return _OTHER_SECTION


def api_reference() -> str:
    parts = []
    explained: set[str] = set()
    for title, names in api_sections().items():
        parts.append(f"## {title}\n")
        for name in names:
            parts.append(f"::: agentrag.{name}\n")
            module = _step_module(name)
            if module and module not in explained:  # a step: its module's docstring says what it does
                explained.add(module)
                parts.append(f"::: {module}\n{_DOCSTRING_ONLY}")
    return "\n".join(parts)


def _step_module(name: str) -> str | None:
    """The module of a pipeline step's body (``agentrag.steps.search``), None for anything else."""
    import agentrag
    from agentrag.step import Step

    value = getattr(agentrag, name)
    return value._body.__module__ if isinstance(value, Step) else None
