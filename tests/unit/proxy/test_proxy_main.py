"""``mqproxy -c FILE``'s config handling (mqha.proxy.__main__, mqha.proxy.config): ``-p`` prints every
key with its source, a bad key or a missing controllerAddr is one line naming it, exit 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqha.config import parse_properties
from mqha.proxy import __main__ as proxy_main
from mqha.proxy.config import PROXY_CONFIG
from mqha.security.credentials import MASK


def run_main(conf: Path, *extra: str) -> None:
    proxy_main.main(["-c", str(conf), *extra])


def test_print_shows_every_key_and_masks_the_user(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "proxy.conf"
    conf.write_text(
        'controllerAddr=127.0.0.1:9878\ngrpcServerPort=18081\ninitAuthenticationUser={"username": "u", '
        '"password": "secret-password"}\n'
    )
    run_main(conf, "-p")
    out = capsys.readouterr().out
    printed = parse_properties(out)
    assert set(printed) == set(PROXY_CONFIG.keys)
    assert printed["grpcServerPort"] == "18081" and printed["initAuthenticationUser"] == MASK
    assert printed["defaultTopicQueueNums"] == "8" and f"# from {conf}" in out and "# from default" in out


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("controllerAddr=127.0.0.1:9878\ngrpcServerPort=0\n", "grpcServerPort"),
        ("controllerAddr=127.0.0.1:9878\nnoSuchKey=1\n", "noSuchKey"),
        ("grpcServerPort=8081\n", "controllerAddr"),
        ("controllerAddr=nohostport\n", "controllerAddr"),
        ("controllerAddr=127.0.0.1:9878\nauthenticationEnabled=true\n", "initAuthenticationUser"),
        (  # offsets are committed to the controllers with the inner credentials (§13)
            "controllerAddr=127.0.0.1:9878\nauthenticationEnabled=true\n"
            'initAuthenticationUser={"username": "u", "password": "secret-password"}\n',
            "innerClientAuthenticationCredentials",
        ),
        (  # a copied example's placeholder, even with authentication off
            "controllerAddr=127.0.0.1:9878\n"
            'initAuthenticationUser={"username": "u", "password": "CHANGE-ME-app-password"}\n',
            "initAuthenticationUser",
        ),
        ("controllerAddr=127.0.0.1:9878\ntlsEnable=true\n", "tls.server.certPath"),
        (  # TLS on the gRPC port: the files are checked at start, as on the brokers
            "controllerAddr=127.0.0.1:9878\ntlsEnable=true\ntls.server.certPath=/nonexistent/c.pem\n"
            "tls.server.keyPath=/nonexistent/k.pem\n",
            "tls.server.certPath",
        ),
        ("controllerAddr=127.0.0.1:9878\ntls.client.trustCertPath=/ca.pem\n", "tls.client.trustCertPath"),
        ("controllerAddr=127.0.0.1:9878\nflushConsumerOffsetInterval=50\n", "flushConsumerOffsetInterval"),
        ("controllerAddr=127.0.0.1:9878\nproxyCpuAffinity=one\n", "proxyCpuAffinity"),
        ("controllerAddr=127.0.0.1:9878\nproxyCpuAffinity=1-0\n", "proxyCpuAffinity"),
        ("controllerAddr=127.0.0.1:9878\nproxyCpuAffinity=4095\n", "proxyCpuAffinity"),  # no such CPU here
        ("controllerAddr=127.0.0.1:9878\nmetricsExporterType=LOG\n", "metricsExporterType"),
        ("controllerAddr=127.0.0.1:9878\nmetricsGrpcExporterTarget=h:4317\n", "metricsGrpcExporterTarget"),
        # a decision needs an authenticated user (§12.12)
        ("controllerAddr=127.0.0.1:9878\nauthorizationEnabled=true\n", "authorizationEnabled"),
        (
            "controllerAddr=127.0.0.1:9878\nauthenticationClockSkewSeconds=0\n",
            "authenticationClockSkewSeconds",
        ),
        ("controllerAddr=127.0.0.1:9878\nproxyAclRefreshMillis=10\n", "proxyAclRefreshMillis"),
    ],
)
def test_a_bad_config_is_one_line_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, key: str
) -> None:
    conf = tmp_path / "proxy.conf"
    conf.write_text(text)
    with pytest.raises(SystemExit) as stopped:
        run_main(conf)
    assert stopped.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"mqproxy: config key '{key}'"), err


@pytest.mark.parametrize(
    ("limits", "expected", "served"),
    [
        ((1024, 524288), 11024, 10_000),  # raised to fit grpcMaxConnections=10000 + the proxy's own
        ((1024, 4096), 4096, 3072),  # as far as the hard limit allows; gRPC's limit lowered to fit
        ((1024, 1024), None, 768),
        ((65536, 524288), None, 10_000),  # already enough: left alone
    ],
)
def test_the_open_files_limit_is_raised_to_fit_the_connections(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    limits: tuple[int, int],
    expected: int | None,
    served: int,
) -> None:
    import resource

    set_to: list[tuple[int, int]] = []
    monkeypatch.setattr(resource, "getrlimit", lambda which: limits)
    monkeypatch.setattr(resource, "setrlimit", lambda which, new: set_to.append(new))
    assert proxy_main._fit_open_files(10_000) == served
    assert set_to == ([] if expected is None else [(expected, limits[1])])
    assert ("grpcMaxConnections=10000" in caplog.text) is (served < 10_000)
