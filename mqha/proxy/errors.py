"""What a failed put to a broker means for its outcome (``mqha.proxy.puts``, ``mqha.proxy.put_streams``)."""

from __future__ import annotations

from mqha.errors import MqhaError


class NotSent(MqhaError):
    """No connection to the broker: the request was never written."""


class NoAnswer(MqhaError):
    """The request was written and no complete answer came: it may have been acted on."""
