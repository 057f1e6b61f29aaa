"""``GET /v1/history/rows`` of the controller API (docs/architecture.md §5): a page of this node's
``history.db`` for ``mqha export --controller``, an admin call. SHELL (aiohttp).

Kept beside ``mqha.controller.http_api`` (which lists it in ``ROUTES`` and whose admin check, 400 and
metrics label it uses) so that module stays within its size; the paging is ``mqha.history.pages``.
"""

from __future__ import annotations

from aiohttp import web

from mqha.controller import http_kit as api
from mqha.history.pages import NDJSON, serve_page


async def get_history_rows(request: web.Request) -> web.Response:
    """Admin: one NDJSON page of ``<controllerStorePath>/history.db``."""

    api.require_admin(request)
    store = api.service_of(request).config_store.config["controllerStorePath"]
    request[api.CODE_KEY] = api.Code.SUCCESS.name  # a bad query's HttpError is answered by _envelope
    return web.Response(body=await serve_page(store, request.query, api.bad_request), content_type=NDJSON)
