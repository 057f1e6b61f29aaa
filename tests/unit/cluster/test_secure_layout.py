"""A secure local cluster: fresh secrets per plan, loadable configs, owner-only files."""

from __future__ import annotations

import stat

from mqha.broker.config import load_broker_config
from mqha.cluster.client_auth import broker_user
from mqha.cluster.layout import STATE_FILE, ClusterLayout
from mqha.cluster.secrets import secure_settings
from mqha.controller.config import load_controller_config
from mqha.proxy.config import load_proxy_layers


def test_a_secure_plan_turns_authentication_on_with_fresh_secrets(tmp_path) -> None:
    one = ClusterLayout.plan(tmp_path / "a", controllers=1, groups=1, replicas=2, secure=True)
    two = ClusterLayout.plan(tmp_path / "b", controllers=1, groups=1, replicas=2, secure=True)
    assert one.broker_settings["authenticationEnabled"] == "true"
    assert (
        one.controller_settings["controllerRaftPassword"] != two.controller_settings["controllerRaftPassword"]
    )
    assert (
        one.controller_settings["innerClientAuthenticationCredentials"]
        == one.broker_settings["innerClientAuthenticationCredentials"]
    )
    assert broker_user(one.broker_settings) is not None
    for node in one.nodes.values():
        one.write_config(node)
        assert stat.S_IMODE(node.conf.stat().st_mode) == 0o600
        loaded = (load_controller_config if node.kind == "controller" else load_broker_config)(str(node.conf))
        assert loaded["authenticationEnabled"] is True
    one.save({})
    assert stat.S_IMODE((one.run_dir / STATE_FILE).stat().st_mode) == 0o600
    assert ClusterLayout.load(one.run_dir).broker_settings == one.broker_settings


def test_given_settings_win_over_the_generated_ones(tmp_path) -> None:
    layout = ClusterLayout.plan(
        tmp_path,
        controllers=1,
        groups=1,
        replicas=1,
        secure=True,
        broker_settings={"authenticationEnabled": "false"},
    )
    assert layout.broker_settings["authenticationEnabled"] == "false"
    assert layout.controller_settings["authenticationEnabled"] == "true"
    insecure = ClusterLayout.plan(tmp_path / "x", controllers=1, groups=1, replicas=1)
    assert "authenticationEnabled" not in insecure.broker_settings


def test_a_secure_plans_proxies_get_the_user_and_the_inner_credentials(tmp_path) -> None:
    """mqproxy puts as the brokers' user and signs its consumer-offset commits (docs/architecture.md
    §13): its config has both, and mqproxy's own loader accepts it."""
    layout = ClusterLayout.plan(tmp_path, controllers=1, groups=1, replicas=1, secure=True, proxies=1)
    (proxy,) = [node for node in layout.nodes.values() if node.kind == "proxy"]
    layout.write_config(proxy)
    loaded, _ = load_proxy_layers(str(proxy.conf))
    assert loaded["authenticationEnabled"] is True
    for key in ("initAuthenticationUser", "innerClientAuthenticationCredentials"):
        assert loaded[key] == layout.broker_settings[key], key
    assert stat.S_IMODE(proxy.conf.stat().st_mode) == 0o600


def test_generated_secrets_are_command_line_arguments() -> None:
    # One urlsafe secret in 64 began with "-", and `--token "$MQHA_ADMIN_TOKEN"` then failed to parse
    # ("argument --token: expected one argument"; seen in test_analysis_live under `mqha export`).
    for _ in range(1000):
        controller, broker = secure_settings()
        for value in (*controller.values(), *broker.values()):
            assert not value.startswith("-"), value
