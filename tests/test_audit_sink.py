"""The default audit sink: one JSON line per event on its logger, and no JSON built for a line the
logger would drop (the default: ``agentrag.audit`` is not enabled at INFO unless the user says so)."""

from __future__ import annotations

import json
import logging

import pytest

from agentrag.audit import AuditEvent, AuditEventType, LoggingAuditSink


def _event() -> AuditEvent:
    return AuditEvent(
        type=AuditEventType.RETRIEVAL_EXECUTED, query_id="q-1", tenant="acme", details={"chunk_count": 2}
    )


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[AuditEvent]:
    built: list[AuditEvent] = []
    to_json = AuditEvent.to_json

    def counted(self: AuditEvent) -> str:
        built.append(self)
        return to_json(self)

    monkeypatch.setattr(AuditEvent, "to_json", counted)
    return built


def test_the_sink_builds_json_only_for_a_line_its_logger_writes(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    built = _counting(monkeypatch)
    logger = logging.getLogger("agentrag.audit.test-sink")
    with caplog.at_level(logging.WARNING, logger=logger.name):
        LoggingAuditSink(logger).emit(_event())  # INFO under WARNING: dropped, and no JSON built
        assert built == [] and not [r for r in caplog.records if r.name == logger.name]
        LoggingAuditSink(logger, level=logging.WARNING).emit(_event())  # the sink's own level counts
        assert len(built) == 1
    with caplog.at_level(logging.INFO, logger=logger.name):
        LoggingAuditSink(logger).emit(_event())
    assert len(built) == 2
    *_, record = [r for r in caplog.records if r.name == logger.name]
    kind, _, line = record.getMessage().partition(" ")
    assert kind == "RETRIEVAL_EXECUTED"
    assert json.loads(line)["details"] == {"chunk_count": 2}
    assert json.loads(line)["tenant"] == "acme"
