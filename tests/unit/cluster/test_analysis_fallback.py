"""``export_and_analyze``'s fallback: an engine that gives no verdict (a Spark JVM out of time on a
loaded machine) leaves the verdict to the fallback engine on the same export."""

from __future__ import annotations

import json
from pathlib import Path

from mqha.cluster.checking import PYTHON_ENGINE, ToolChild, export_and_analyze
from mqha.history.schema import VERDICT_FILE

VERDICT = {"checks": {"lost_ack": {"count": 0}, "two_masters_in_epoch": {"count": 0}}}


class FakeChild(ToolChild):
    """Answers ``mqha export`` with 0 and ``mqha analyze`` per engine: a verdict file or a timeout."""

    def __init__(self, export_dir: Path, timed_out: set[str]) -> None:
        super().__init__()
        self.export_dir = export_dir
        self.timed_out = timed_out
        self.engines: list[str] = []

    def run(self, args: list[str], timeout: float) -> tuple[int, str]:
        if "export" in args:
            self.export_dir.mkdir(parents=True)
            return 0, "exported"
        engine = args[args.index("--engine") + 1]
        self.engines.append(engine)
        if engine in self.timed_out:
            return 124, f"timed out after {timeout:g} s"
        (self.export_dir / "report").mkdir(exist_ok=True)
        (self.export_dir / "report" / VERDICT_FILE).write_text(json.dumps(VERDICT))
        return 0, "mqha analyze: OK"


def test_a_timed_out_engine_leaves_the_verdict_to_the_fallback(tmp_path: Path) -> None:
    child = FakeChild(tmp_path / "export", timed_out={"spark"})
    result = export_and_analyze(tmp_path, "spark", child, fallback=PYTHON_ENGINE)
    assert child.engines == ["spark", PYTHON_ENGINE]
    assert result.engine == PYTHON_ENGINE and result.analyze_code == 0
    assert result.invariants == {"lost_ack": 0, "two_masters_in_epoch": 0}
    assert result.fallback_reason == "spark gave no verdict (exit 124)"


def test_without_a_fallback_a_timed_out_engine_gives_no_verdict(tmp_path: Path) -> None:
    child = FakeChild(tmp_path / "export", timed_out={"spark"})
    result = export_and_analyze(tmp_path, "spark", child)
    assert child.engines == ["spark"]
    assert result.invariants is None and result.analyze_code == 124 and not result.fallback_reason


def test_an_engine_with_a_verdict_is_not_second_guessed(tmp_path: Path) -> None:
    child = FakeChild(tmp_path / "export", timed_out=set())
    result = export_and_analyze(tmp_path, "spark", child, fallback=PYTHON_ENGINE)
    assert child.engines == ["spark"]
    assert result.engine == "spark" and result.invariants is not None and not result.fallback_reason
