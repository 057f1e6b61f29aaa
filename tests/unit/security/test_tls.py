"""mqha.security.tls: contexts from the tls.* keys, one-line errors naming the key, in-memory handshakes."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from mqha.errors import ConfigError
from mqha.security.keys import check_security_keys
from mqha.security.tls import (
    check_tls_files,
    client_context,
    scheme_of,
    server_context,
    trust_context,
)
from tests.helpers.tls_certs import NodeFiles, TestCA


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def node(ca: TestCA) -> NodeFiles:
    return ca.node("n1")


def _settings(node: NodeFiles, **changes: object) -> dict[str, object]:
    """The typed values a loaded config holds (the file's strings parsed)."""
    return {**node.settings(), "tlsEnable": True, "tls.client.verifyHostname": False, **changes}


def handshake(server: ssl.SSLContext, client: ssl.SSLContext, host: str = "127.0.0.1") -> None:
    """A whole TLS handshake through memory buffers (no sockets); raises the client's or server's error."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    c = client.wrap_bio(c_in, c_out, server_hostname=host)
    s = server.wrap_bio(s_in, s_out, server_side=True)
    done = {"c": False, "s": False}
    for _ in range(10):
        for name, obj in (("c", c), ("s", s)):
            if not done[name]:
                try:
                    obj.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            return
    raise AssertionError("handshake did not finish")


def test_without_tls_enable_there_is_no_context_and_http() -> None:
    assert server_context({}) is None and client_context({"tlsEnable": False}) is None
    assert scheme_of(None) == "http"
    check_tls_files({"tlsEnable": False, "tls.server.certPath": "/nowhere"})


def test_a_client_trusting_the_ca_completes_a_handshake(node: NodeFiles) -> None:
    values = _settings(node)
    server, client = server_context(values), client_context(values)
    assert server is not None and client is not None
    assert scheme_of(client) == "https"
    assert client.verify_mode == ssl.CERT_REQUIRED and client.check_hostname is False
    handshake(server, client)


def test_a_client_trusting_another_ca_is_refused(node: NodeFiles, tmp_path: Path) -> None:
    other = TestCA(tmp_path / "other", "someone else")
    server = server_context(_settings(node))
    assert server is not None
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server, trust_context(str(other.ca_path)))


def test_verify_hostname_checks_the_ip_san(ca: TestCA, node: NodeFiles) -> None:
    checking = client_context(_settings(node, **{"tls.client.verifyHostname": True}))
    assert checking is not None and checking.check_hostname
    server = server_context(_settings(node))
    assert server is not None
    handshake(server, checking, "127.0.0.1")
    with pytest.raises(ssl.SSLCertVerificationError, match="IP address mismatch"):
        handshake(server, checking, "10.1.2.3")
    handshake(server, trust_context(str(ca.ca_path)), "10.1.2.3")  # chain only: any address


@pytest.mark.parametrize(
    ("key", "content", "rule"),
    [
        ("tls.server.certPath", None, "cannot read"),
        ("tls.server.keyPath", None, "cannot read"),
        ("tls.client.trustCertPath", None, "cannot read"),
        ("tls.server.certPath", b"not a certificate", "holds no PEM certificate"),
        ("tls.server.keyPath", b"not a key", "holds no PEM private key"),
        ("tls.client.trustCertPath", b"junk", "holds no PEM CA certificate"),
        (
            "tls.server.certPath",
            b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
            "cannot load",
        ),
        (
            "tls.client.trustCertPath",
            b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
            "cannot load",
        ),
    ],
)
def test_a_bad_file_is_one_config_error_naming_its_key(
    node: NodeFiles, tmp_path: Path, key: str, content: bytes | None, rule: str
) -> None:
    path = tmp_path / "file.pem"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        check_security_keys(_settings(node, **{key: str(path)}), ())
    message = str(caught.value)
    assert caught.value.key == key and rule in message and "\n" not in message


def test_a_key_of_another_certificate_names_the_key_path(ca: TestCA, node: NodeFiles) -> None:
    other = ca.node("n2")
    with pytest.raises(ConfigError) as caught:
        check_tls_files(_settings(node, **{"tls.server.keyPath": str(other.key)}))
    assert caught.value.key == "tls.server.keyPath" and "is not the key of" in str(caught.value)


def test_tls_enable_requires_the_three_paths(node: NodeFiles) -> None:
    for key in ("tls.server.certPath", "tls.server.keyPath", "tls.client.trustCertPath"):
        with pytest.raises(ConfigError, match="required when tlsEnable=true") as caught:
            check_security_keys(_settings(node, **{key: ""}), ())
        assert caught.value.key == key
