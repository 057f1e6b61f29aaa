"""``mqha export --controller ADDR OUT``: a live cluster's histories over the network (shell).

Order (docs/architecture.md §5), chosen so that no exported ack can be younger than the final logs it
is compared with:

1. the cluster's nodes: the controllers from ``/v1/controller/metadata`` (its ``peers``), the broker
   sets from ``/v1/groups`` and every replica's address from ``/v1/sync-state-data`` (in and out of
   the SyncStateSet), asked of the first given controller that answers (the leader for the reads);
2. every controller's ``history.db`` (``GET /v1/history/rows``, page by page);
3. every broker's ``history.db`` but its final log (its acks, roles, epochs, truncations);
4. every broker's final log: ``POST /v1/history/final-log`` (the broker writes its log index into its
   history), then its ``final_logs`` pages.

Pages are NDJSON (``mqha.history.pages``) written straight into the export's tables (``TableSinks``:
JSON Lines, Parquet or ``auto``), so memory stays bounded whatever the history's size; a page that
fails is asked again (``ATTEMPTS``), a node that still fails becomes a *problem* in ``manifest.json``
(a broker's history or final log missing: ``mqha analyze`` then says ``inconclusive``) or, for a
controller when another one answered, a *note* (every controller holds the same replicated events).
Re-running the export writes the directory anew. Admin calls carry ``Authorization: Bearer <token>``
(``--token`` or ``$MQHA_ADMIN_TOKEN``, as mqadmin); ``--tls-ca`` switches to https.
"""

from __future__ import annotations

import json
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqha.analysis.export import AUTO, ExportSummary, TableSinks
from mqha.errors import MqhaError
from mqha.history.pages import PAGE_MAX
from mqha.history.schema import FINAL_LOGS, TABLES

ATTEMPTS = 3
TIMEOUT_S = 30.0
FINAL_LOG_TIMEOUT_S = 90.0  # the broker waits up to 30 s for the commit of its dump, plus reading it


class ExportError(MqhaError):
    """No controller answered: nothing to export."""


@dataclass(frozen=True)
class NodeRef:
    """One node to read: its kind (``controller``/``broker``), address and a name for the manifest."""

    kind: str
    address: str
    name: str


class Http:
    """The export's HTTP calls: the admin token, https with ``tls_ca``, bounded timeouts."""

    def __init__(self, token: str | None = None, tls_ca: str | None = None) -> None:
        from mqha.security.signing import bearer_header
        from mqha.security.tls import trust_context

        self.headers = {"Authorization": bearer_header(token)} if token else {}
        self.context: ssl.SSLContext | None = trust_context(tls_ca) if tls_ca else None
        self.scheme = "https" if tls_ca else "http"

    def url(self, address: str, path: str, query: Mapping[str, Any] | None = None) -> str:
        tail = f"?{urllib.parse.urlencode(query, doseq=True)}" if query else ""
        return f"{self.scheme}://{address}{path}{tail}"

    def open(self, method: str, url: str, timeout: float = TIMEOUT_S) -> Any:
        request = urllib.request.Request(
            url, method=method, headers=self.headers, data=b"" if method == "POST" else None
        )
        return urllib.request.urlopen(request, timeout=timeout, context=self.context)

    def json(
        self,
        method: str,
        address: str,
        path: str,
        query: Mapping[str, Any] | None = None,
        timeout: float = TIMEOUT_S,
    ) -> dict[str, Any]:
        try:
            with self.open(method, self.url(address, path, query), timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise OSError(f"{method} {path}: HTTP {exc.code}: {_remark(exc)}") from None

    def lines(self, address: str, table: str, after_seq: int) -> Iterator[bytes]:
        query = {"table": table, "afterSeq": after_seq, "limit": PAGE_MAX}
        try:
            with self.open("GET", self.url(address, "/v1/history/rows", query)) as response:
                yield from response
        except urllib.error.HTTPError as exc:
            raise OSError(f"GET /v1/history/rows: HTTP {exc.code}: {_remark(exc)}") from None


def _remark(exc: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(exc.read())
    except (OSError, ValueError):
        return exc.reason
    return (
        f"{body.get('codeName', '')} {body.get('remark', '')}".strip()
        if isinstance(body, dict)
        else exc.reason
    )


def split_addresses(values: Sequence[str]) -> list[str]:
    """``--controller`` values: each may hold several addresses separated by ``;`` or ``,``."""
    out: list[str] = []
    for value in values:
        out += [a.strip() for a in value.replace(",", ";").split(";") if a.strip()]
    return list(dict.fromkeys(out))


def _brokers(http: Http, reader: str) -> list[NodeRef]:
    """Every replica the controllers know, in or out of its SyncStateSet (asked of ``reader``)."""
    groups = http.json("GET", reader, "/v1/groups").get("clusters", {})
    names = sorted({name for members in groups.values() for name in members})
    if not names:
        return []
    query = {"brokerName": names}
    table = http.json("GET", reader, "/v1/sync-state-data", query).get("replicasInfoTable", {})
    brokers: dict[str, NodeRef] = {}
    for name in names:
        info = table.get(name, {})
        for replica in [*info.get("inSyncReplicas", []), *info.get("notInSyncReplicas", [])]:
            addr = replica.get("brokerAddress")
            if addr and addr not in brokers:
                brokers[addr] = NodeRef("broker", addr, f"broker {name}/{replica.get('brokerId')} {addr}")
    return list(brokers.values())


def discover(http: Http, controllers: Sequence[str]) -> tuple[list[NodeRef], list[NodeRef], list[str]]:
    """The controllers and brokers of the cluster (step 1), and notes on controllers that did not
    answer; the first controller whose metadata and leader answer is used."""
    notes: list[str] = []
    for address in controllers:
        try:
            meta = http.json("GET", address, "/v1/controller/metadata")
            brokers = _brokers(http, meta.get("leaderAddress") or address)
        except (OSError, ValueError) as exc:
            notes.append(f"controller {address}: cannot list the cluster: {exc}")
            continue
        peers = [p.split(":", 1) for p in str(meta.get("peers", "")).split(";") if ":" in p]
        found = [NodeRef("controller", addr, f"controller {nid} {addr}") for nid, addr in peers]
        return found or [NodeRef("controller", address, f"controller {address}")], brokers, notes
    raise ExportError("no controller answered: " + "; ".join(notes))


def _pull(http: Http, node: NodeRef, table: str, sinks: TableSinks) -> int:
    """Every row of ``table`` on ``node``, page after page; a failed page is asked again."""
    after, count = 0, 0
    while True:
        for attempt in range(ATTEMPTS):
            rows = 0
            try:
                for line in http.lines(node.address, table, after):
                    if not line.strip():
                        continue
                    row = json.loads(line)
                    sinks.write(table, row)
                    after, rows = int(row["seq"]), rows + 1
                break
            except (OSError, ValueError) as exc:
                # Rows of a broken page were written up to ``after``: the next attempt continues there.
                count += rows
                if attempt + 1 == ATTEMPTS:
                    raise OSError(f"{table}: {exc}") from None
                time.sleep(0.5 * (attempt + 1))
        count += rows
        if rows < PAGE_MAX:
            return count


def _read_node(
    http: Http, node: NodeRef, tables: Sequence[str], sinks: TableSinks, summary: ExportSummary
) -> dict[str, int] | None:
    source = {"node": node.name, "kind": node.kind, "address": node.address, "rows": {}}
    try:
        for table in tables:
            source["rows"][table] = _pull(http, node, table, sinks)
    except OSError as exc:
        source["error"] = str(exc)
        summary.sources.append(source)
        return None
    summary.sources.append(source)
    return source["rows"]


def export_cluster(
    controllers: Sequence[str],
    out_dir: str | os.PathLike[str],
    *,
    token: str | None = None,
    tls_ca: str | None = None,
    fmt: str = AUTO,
) -> ExportSummary:
    """Steps 1-4 of the module docstring into ``out_dir``; raises ``ExportError`` if no controller answers."""
    http = Http(token, tls_ca)
    controller_nodes, brokers, notes = discover(http, split_addresses(controllers))
    summary = ExportSummary(Path(out_dir), rows=dict.fromkeys(TABLES, 0), notes=notes)
    history_tables = [t for t in TABLES if t != FINAL_LOGS]
    with TableSinks(summary, fmt) as sinks:
        answered = 0
        for node in controller_nodes:
            if _read_node(http, node, list(TABLES), sinks, summary) is not None:
                answered += 1
            else:
                summary.notes.append(f"{node.name}: history not read: {summary.sources[-1]['error']}")
        if not answered:
            summary.problems.append("no controller's history could be read")
        for node in brokers:
            if _read_node(http, node, history_tables, sinks, summary) is None:
                summary.problems.append(f"{node.name}: history not read: {summary.sources[-1]['error']}")
        for node in brokers:
            try:
                http.json("POST", node.address, "/v1/history/final-log", timeout=FINAL_LOG_TIMEOUT_S)
            except OSError as exc:
                summary.problems.append(f"{node.name}: no final log: {exc}")
                continue
            if _read_node(http, node, [FINAL_LOGS], sinks, summary) is None:
                summary.problems.append(f"{node.name}: final log not read: {summary.sources[-1]['error']}")
        if not brokers:
            summary.problems.append("the controllers know no broker")
    summary.write_manifest()
    return summary
