"""The notebooks run against the suite's own temporary data directory (tests/isolation.py)."""

pytest_plugins = ["tests.isolation"]
