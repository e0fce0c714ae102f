"""Issue #38 item 3, release discipline: one version everywhere, a changelog entry for it, complete
package metadata, and deprecations that warn with the versions docs/explanation/releases.md promises."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import warnings

import pytest

import agentrag
from agentrag._deprecation import (
    AgentragDeprecationWarning,
    deprecated,
    deprecated_parameter,
    warn_deprecated,
)
from agentrag._version import __version__
from tests.conftest import REPO

SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?$")


def test_one_version_everywhere() -> None:
    assert SEMVER.match(__version__) and agentrag.__version__ == __version__
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["hatch"]["version"]["path"] == "agentrag/_version.py"
    out = subprocess.run(
        [sys.executable, "-m", "agentrag", "--version"], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == f"agentrag {__version__}"


def test_the_changelog_has_an_entry_for_this_version() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text()
    versions = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", changelog, flags=re.M)
    assert versions[0] == ("Unreleased", "")  # Keep a Changelog: the next changes go on top
    released = [v for v, _ in versions[1:]]
    assert released[0] == __version__, "bump agentrag/_version.py and CHANGELOG.md together"
    parsed = [tuple(int(p) for p in v.split(".")) for v in released]
    assert parsed == sorted(parsed, reverse=True) and len(set(parsed)) == len(parsed)
    assert all(date for _, date in versions[1:])


def test_the_package_metadata_is_complete() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["readme"] == "README.md" and project["license"] == "MIT"
    assert (REPO / "LICENSE").read_text().startswith("MIT License")
    assert len(project["keywords"]) >= 5 and "pgvector" in project["keywords"]
    classifiers = project["classifiers"]
    assert any(c.startswith("Development Status ::") for c in classifiers)
    assert "Typing :: Typed" in classifiers and (REPO / "agentrag" / "py.typed").exists()
    minor = int(project["requires-python"].removeprefix(">=3."))
    assert f"Programming Language :: Python :: 3.{minor}" in classifiers


# -- deprecations --------------------------------------------------------------------------------------


def test_a_deprecated_function_warns_at_the_callers_line_and_still_works() -> None:
    @deprecated(since="0.3", removal="0.5", instead="agentrag.new_thing()")
    def old(x: int) -> int:
        """Double it."""
        return 2 * x

    with pytest.warns(AgentragDeprecationWarning) as caught:
        assert old(2) == 4
    warning = caught[0]
    assert str(warning.message) == (
        "test_a_deprecated_function_warns_at_the_callers_line_and_still_works.<locals>.old is deprecated"
        " since agentrag 0.3 and will be removed in 0.5; use agentrag.new_thing() instead"
    )
    assert warning.filename == __file__  # the caller's line, not the helper's
    assert isinstance(warning.message, DeprecationWarning)
    assert (warning.message.since, warning.message.removal) == ("0.3", "0.5")
    assert old.__name__ == "old" and ".. deprecated:: 0.3" in (old.__doc__ or "")


def test_a_deprecated_class_warns_on_instantiation() -> None:
    @deprecated(since="0.2", removal="1.0")
    class Old:
        def __init__(self, value: int) -> None:
            self.value = value

    with pytest.warns(AgentragDeprecationWarning, match="Old is deprecated since agentrag 0.2"):
        assert Old(3).value == 3
    assert isinstance(Old, type) and ".. deprecated:: 0.2" in (Old.__doc__ or "")


def test_a_deprecated_parameter_warns_only_when_passed() -> None:
    @deprecated_parameter("top_n", since="0.2", removal="0.4", instead="top_k=")
    def search(query: str, *, top_k: int = 5, top_n: int | None = None) -> int:
        return top_n if top_n is not None else top_k

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert search("q", top_k=3) == 3  # no warning: the parameter is not used
    with pytest.warns(AgentragDeprecationWarning, match=r"the top_n= parameter of .*search .* use top_k="):
        assert search("q", top_n=7) == 7


def test_an_error_filter_turns_a_deprecation_into_a_failure() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        with pytest.raises(AgentragDeprecationWarning):
            warn_deprecated("agentrag.old", since="0.2", removal="0.4")


@pytest.mark.parametrize(("since", "removal"), [("0.3", "0.3"), ("0.4", "0.3"), ("soon", "1.0"), ("0.2", "")])
def test_bad_versions_fail_where_the_deprecation_is_declared(since: str, removal: str) -> None:
    with pytest.raises(ValueError):
        deprecated(since=since, removal=removal)(lambda: None)
