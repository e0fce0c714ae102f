"""``agentrag demo`` loads the embedding model before its first step, and says so when that was slow
(a machine's first use exports the model to ONNX): the time is not shown as the first step's."""

from __future__ import annotations

from typing import Any

import pytest

from agentrag.demo import load_embedder


class _Embedder:
    def __init__(self) -> None:
        self.loads = 0

    def load(self) -> _Embedder:
        self.loads += 1
        return self


class _Store:
    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder


def test_a_slow_load_is_announced_with_its_time(capsys: pytest.CaptureFixture[str]) -> None:
    embedder = _Embedder()
    took = load_embedder(_Store(embedder), notice_after=0.0)
    assert embedder.loads == 1 and took >= 0.0
    assert (
        "embedding model loaded in 0 s (its first use on this machine exports it to ONNX, once)"
        in capsys.readouterr().out
    )


def test_a_fast_load_says_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    embedder = _Embedder()
    load_embedder(_Store(embedder), notice_after=60.0)
    assert embedder.loads == 1 and capsys.readouterr().out == ""


def test_an_embedder_without_a_load_step_is_left_alone(capsys: pytest.CaptureFixture[str]) -> None:
    assert load_embedder(_Store(object())) == 0.0
    assert capsys.readouterr().out == ""
