"""The topic routes of the controller API (docs/architecture.md §3.3, §4.5). SHELL (aiohttp).

``POST /v1/topics/update`` and ``POST /v1/topics/delete`` (admin, leader), ``GET /v1/topics`` and
``GET /v1/topics/route?topic=`` (open, leader). Kept beside ``mqha.controller.http_api`` (which lists
them in ``ROUTES`` and whose parsing, admin check and answers they use) so that module stays within its
size; the decisions are ``mqha.controller.topics``.
"""

from __future__ import annotations

from aiohttp import web

from mqha.wire import controller_api as wire


async def update_topic(request: web.Request) -> web.Response:
    from mqha.controller import http_api as api  # imported here: http_api imports this module

    req = await api._read_request(request, wire.UpdateTopicRequest)
    api._require_admin(request)
    return api.respond(request, await api._service(request).update_topic(req))


async def delete_topic(request: web.Request) -> web.Response:
    from mqha.controller import http_api as api

    req = await api._read_request(request, wire.DeleteTopicRequest)
    api._require_admin(request)
    return api.respond(request, await api._service(request).delete_topic(req))


async def topic_list(request: web.Request) -> web.Response:
    from mqha.controller import http_api as api

    api._query(request, ())
    return api.respond(request, await api._service(request).topic_list())


async def topic_route(request: web.Request) -> web.Response:
    from mqha.controller import http_api as api

    req = api._parse(wire.TopicRouteRequest, api._query(request, ("topic",)))
    return api.respond(request, await api._service(request).topic_route(req))


ROUTES = (
    ("GET", "/v1/topics", "topicList", topic_list),
    ("GET", "/v1/topics/route", "topicRoute", topic_route),
    ("POST", "/v1/topics/update", "updateTopic", update_topic),
    ("POST", "/v1/topics/delete", "deleteTopic", delete_topic),
)
"""(method, path, name, handler) as ``http_api.ROUTES``; the names are RocketMQ's mqadmin commands."""
