"""A server command run without its extra says which extra to install, never a traceback
(issue #37 item 6): ``serve`` as ``mcp`` always did, through one shared check."""

from __future__ import annotations

import sys

import pytest

from agentrag.cli import main


@pytest.mark.parametrize(
    ("argv", "missing", "says"),
    [
        (["serve"], "uvicorn", "agentrag serve needs the server extra: pip install 'agentrag[server]'"),
        (["serve"], "fastapi", "agentrag serve needs the server extra: pip install 'agentrag[server]'"),
        (
            ["token", "mint", "--tenant", "t", "--sub", "u"],
            "jwt",
            "agentrag token mint needs the server extra: pip install 'agentrag[server]'",
        ),
        (["mcp"], "mcp", "agentrag mcp needs the mcp extra: pip install 'agentrag[mcp,server]'"),
        (["mcp"], "fastapi", "agentrag mcp needs the server extra: pip install 'agentrag[mcp,server]'"),
    ],
)
def test_a_missing_extra_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], missing: str, says: str
) -> None:
    monkeypatch.setitem(sys.modules, missing, None)  # what an uninstalled package looks like to import
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == says
