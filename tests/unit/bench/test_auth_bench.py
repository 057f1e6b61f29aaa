"""``mqha bench auth``'s pure parts: the proofs a side's clients send, and the tables and targets
built from its JSON figures (no processes)."""

from __future__ import annotations

from typing import Any

import pytest

from mqha.bench.auth import CONTROLLER_SIDES, WORKLOADS, _report, proofs, settings
from mqha.clock import wall_ms
from mqha.cluster.secrets import secure_settings
from mqha.security.credentials import parse_inner_credentials
from mqha.security.signing import RequestVerifier, check_body


def test_an_authentication_off_cluster_gets_no_proofs() -> None:
    assert proofs({}) == (None, None)
    assert proofs({"authenticationEnabled": "false"}) == (None, None)


def test_a_secure_cluster_gets_a_broker_signature_and_the_admin_token() -> None:
    controller, _ = secure_settings()
    broker, admin = proofs(controller)
    assert broker is not None and admin is not None
    inner = parse_inner_credentials(controller["innerClientAuthenticationCredentials"])
    verifier = RequestVerifier({inner.access_key: inner}, "127.0.0.1:9878")
    target, body = "/v1/groups/set0/sync-state-set", b'{"masterBrokerId":1}'
    first, second = (broker("POST", "127.0.0.1:9878", target, body)["Authorization"] for _ in range(2))
    assert first != second  # a fresh nonce per request
    for header in (first, second):
        verdict = verifier.verify("POST", target, header, wall_ms())
        assert verdict.denial is None and check_body(verdict.body_sha256, body) is None
    assert admin("POST", "127.0.0.1:9878", "/v1/groups/elect0/elect", b"{}") == {
        "Authorization": f"Bearer {controller['adminAuthToken']}"
    }


def _figures(ops: float, p50: float) -> dict[str, Any]:
    return {"ops_per_s": ops, "p50_ms": p50, "p99_ms": p50 * 3, "errors": {}}


def _data(on_cost: float, catch_up_on: float | None) -> dict[str, Any]:
    """Figures where everything with authentication on runs at ``1 - on_cost`` of off."""
    cfg = settings(quick=True)
    controller = {}
    for workload in WORKLOADS:
        for side in CONTROLLER_SIDES:
            scale = 1.0 if side == "off" else 1 - on_cost
            controller[f"{workload} {side}"] = {
                str(n): _figures(1000 * n * scale, 2.0 / scale) for n in cfg["clients"]
            }
    return {
        "settings": {**cfg, "put_body_bytes": 1024, "catch_up_body_bytes": 16384},
        "controller": controller,
        "put": {"off": {**_figures(5000, 1.5), "errors": 0}, "on": {**_figures(5000, 1.5), "errors": 2}},
        "catch_up": {
            side: {"backlog_bytes": 32 << 20, "mib_per_s": rate, "mib_per_s_runs": [rate]}
            for side, rate in (("off", 500.0), ("on", catch_up_on))
        },
    }


def test_the_report_has_the_tables_and_a_target_per_figure() -> None:
    outcome = _report(_data(on_cost=0.02, catch_up_on=490.0))
    text = outcome.text()
    for title in (
        "controller: authentication off vs on",
        "the Raft password's own cost",
        "put: authentication",
    ):
        assert title in text
    assert "| alter    | 32      | 32000     | 31360    | 0.980  |" in text
    assert "| 8       | 5000      | 5000     | 1.000  |" in text and "| 0 / 2 " in text
    assert "| 16 KiB   | 32          | 500       | 490      | 0.980  |" in text
    clients = len(settings(quick=True)["clients"])
    assert len(outcome.targets) == len(WORKLOADS) * (clients + 1) + 3
    assert all(t.met for t in outcome.targets), [t.row() for t in outcome.targets if not t.met]


@pytest.mark.parametrize("cost", [0.06, 0.2])
def test_a_cost_over_five_percent_misses_every_target(cost: float) -> None:
    outcome = _report(_data(on_cost=cost, catch_up_on=500 * (1 - cost)))
    assert not any(t.met for t in outcome.targets if not t.name.startswith("put"))


def test_a_catch_up_too_short_to_time_is_not_measured() -> None:
    outcome = _report(_data(on_cost=0.0, catch_up_on=None))
    (catch_up,) = (t for t in outcome.targets if t.name.startswith("catch-up"))
    assert catch_up.verdict == "not measured"
    assert outcome.as_json()["catch_up"]["on"]["mib_per_s"] is None
