"""``port_free`` answers what the nodes' own bind would (they bind with SO_REUSEADDR): a port whose
last connection is in TIME-WAIT is free, a listening one is not. Real sockets on 127.0.0.1."""

from __future__ import annotations

import socket

from mqha.cluster.processes import pick_port, port_free


def _listener(port: int) -> socket.socket:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen()
    return server


def test_a_listening_port_is_busy() -> None:
    port = pick_port()
    with _listener(port):
        assert not port_free(port)
    assert port_free(port)


def test_a_port_in_time_wait_after_its_server_closed_first_is_free() -> None:
    # What `mqha cluster down` leaves: the nodes close their accepted connections first, so the
    # listening ports sit in TIME-WAIT for a minute; `up --base-port` on them must still work.
    port = pick_port()
    server = _listener(port)
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()
    accepted.close()  # the server side closes first: its end goes to TIME-WAIT
    client.recv(1)
    client.close()
    server.close()
    assert port_free(port)
    with _listener(port):  # as a node binds it
        pass
