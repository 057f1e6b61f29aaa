"""What a failed put to a broker means for its outcome (``mqha.proxy.puts``, ``mqha.proxy.put_streams``)."""

from __future__ import annotations


class NotSent(Exception):
    """No connection to the broker: the request was never written."""


class NoAnswer(Exception):
    """The request was written and no complete answer came: it may have been acted on."""
