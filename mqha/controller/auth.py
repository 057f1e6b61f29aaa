"""The controller's one authentication check (shell): who a request is, and whether it may call the
route (``mqha.controller.access`` decides; docs/architecture.md §3.3).

It owns the signature verifier of ``innerClientAuthenticationCredentials`` (with its replay cache,
bound to this node's API address: a signature made for another controller is refused) and reads the
wall clock for the signatures' timestamps; ``adminAuthToken`` is read from the live config. Every
signature with a right HMAC feeds the ``SignatureWatch`` (the clock skew it shows, whether this node
can still verify anyone) and refusals are counted by reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from mqha.clock import Clock, MonotonicClock, wall_ms
from mqha.codes import ResponseCode
from mqha.controller import access
from mqha.controller.access import Access, Principal
from mqha.controller.config_store import ConfigStore
from mqha.controller.signature_watch import SignatureWatch
from mqha.security.credentials import parse_inner_credentials
from mqha.security.signing import Denial, RequestVerifier, Verdict, check_body
from mqha.wire.controller_api import Reply

Code = ResponseCode


class ControllerAuth:
    """Identifies the caller of a request and checks it against the route's access."""

    def __init__(self, config_store: ConfigStore, node: str, clock: Clock | None = None) -> None:
        """``node``: this controller's API ``host:port`` in ``controllerDLegerPeers`` (what signers name)."""
        self._config_store = config_store
        self._clock = clock or MonotonicClock()
        text = config_store.config["innerClientAuthenticationCredentials"]
        credentials = parse_inner_credentials(text) if text else None
        # Secrets cannot change through the config API: the verifier is built once.
        aliases = [a.strip() for a in config_store.config["controllerNodeAliases"].split(",") if a.strip()]
        # The replay cache starts empty: signatures dated before now may have been used before a restart.
        self._verifier = RequestVerifier(
            {credentials.access_key: credentials} if credentials else {},
            node,
            aliases=aliases,
            not_before_ms=wall_ms(),
        )
        self._started_ms = self._clock.now_ms()
        self.watch = SignatureWatch(config_store.config["controllerSignatureStallMills"])
        self.refused: Counter[str] = Counter()  # refused signatures by reason (metrics)

    @property
    def config(self) -> Mapping[str, Any]:
        return self._config_store.config

    @property
    def enabled(self) -> bool:
        return bool(self.config["authenticationEnabled"])

    def identify(self, method: str, target: str, header: str | None) -> tuple[Principal | Denial, str]:
        """What ``header`` proves for this request (``target``: the path with its raw query), from the
        headers alone; with a valid signature also the SHA-256 the body must have (else "")."""
        verdicts: list[Verdict] = []

        def verify() -> Denial | None:
            guard = self._verifier.guard
            if guard.not_before_ms is not None and self._clock.now_ms() - self._started_ms > guard.window_ms:
                guard.not_before_ms = None  # every signature dated before the start has expired
            # Wall clock: a signature's timestamp is the broker's wall clock.
            verdict = self._verifier.verify(method, target, header, wall_ms())
            self._observe(verdict)
            verdicts.append(verdict)
            return verdict.denial

        who = access.identify(
            header, enabled=self.enabled, admin_token=self.config["adminAuthToken"], verify=verify
        )
        return who, verdicts[0].body_sha256 if verdicts and verdicts[0].denial is None else ""

    def check_body(self, body_sha256: str, body: bytes) -> tuple[int, Reply] | None:
        """None when no signature vouched for a body (``body_sha256`` "") or ``body`` is the one it
        signed; else (401, reply with code 16)."""
        wrong = check_body(body_sha256, body) if body_sha256 else None
        if wrong is None:
            return None
        self.refused[wrong.reason] += 1
        return wrong.status, Reply(Code.NO_PERMISSION, wrong.remark)

    def _observe(self, verdict: Verdict) -> None:
        if verdict.denial is not None:
            self.refused[verdict.denial.reason or "other"] += 1
        if verdict.skew_ms is None:  # the HMAC was not right: says nothing about clocks
            return
        if verdict.denial is None:
            self.watch.on_verified(verdict.skew_ms)
        elif verdict.denial.reason == "skew":
            self.watch.on_clock_refused(verdict.skew_ms, self._clock.now_ms())

    def signatures_stalled_ms(self) -> int:
        """How long signatures have failed on this node's clock with none accepted (0: they pass)."""
        return self.watch.stalled_for_ms(self._clock.now_ms())

    def signatures_stalled(self) -> bool:
        return self.watch.stalled(self._clock.now_ms())

    def permit(self, required: Access, who: Principal | Denial) -> tuple[int, Reply] | None:
        """None when allowed; else (HTTP status, reply with code 16)."""
        denied = access.permit(required, who, enabled=self.enabled, admin_token=self.config["adminAuthToken"])
        if denied is None:
            return None
        return denied.status, Reply(Code.NO_PERMISSION, denied.remark)
