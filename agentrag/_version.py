"""The package version: the single source (pyproject.toml reads it through hatch; ``agentrag
--version``, ``agentrag.__version__`` and the HTTP service report it). Semantic versioning: see
docs/explanation/releases.md and CHANGELOG.md."""

__version__ = "0.2.0"
