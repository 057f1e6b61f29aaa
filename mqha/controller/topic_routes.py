"""The topic routes of the controller API (docs/architecture.md §3.3, §4.5). SHELL (aiohttp).

``POST /v1/topics/update`` and ``POST /v1/topics/delete`` (admin, leader), ``GET /v1/topics`` and
``GET /v1/topics/route?topic=`` (open, leader); consumer groups' offsets (§13): ``POST
/v1/consumer-offsets/update`` (broker credentials: mqproxy signs it, leader) and ``GET
/v1/consumer-offsets?consumerGroup=[&topic=]`` (open, leader). Kept beside ``mqha.controller.http_api``
(which lists them in ``ROUTES`` and whose parsing, admin check and answers they use) so that module
stays within its size; the decisions are ``mqha.controller.topics`` and ``consumer_offsets``.
"""

from __future__ import annotations

from aiohttp import web

from mqha.controller import http_kit as api
from mqha.wire import controller_api as wire
from mqha.wire import offsets_api


async def update_topic(request: web.Request) -> web.Response:
    req = await api.read_request(request, wire.UpdateTopicRequest)
    api.require_admin(request)
    return api.respond(request, await api.service_of(request).update_topic(req))


async def delete_topic(request: web.Request) -> web.Response:
    req = await api.read_request(request, wire.DeleteTopicRequest)
    api.require_admin(request)
    return api.respond(request, await api.service_of(request).delete_topic(req))


async def topic_list(request: web.Request) -> web.Response:

    api.query_params(request, ())
    return api.respond(request, await api.service_of(request).topic_list())


async def topic_route(request: web.Request) -> web.Response:
    req = api.parse(wire.TopicRouteRequest, api.query_params(request, ("topic",)))
    return api.respond(request, await api.service_of(request).topic_route(req))


async def update_consumer_offset(request: web.Request) -> web.Response:
    req = await api.read_request(request, offsets_api.UpdateConsumerOffsetRequest)
    return api.respond(request, await api.service_of(request).update_consumer_offset(req))


async def query_consumer_offset(request: web.Request) -> web.Response:
    req = api.parse(
        offsets_api.QueryConsumerOffsetRequest, api.query_params(request, ("consumerGroup", "topic"))
    )
    return api.respond(request, await api.service_of(request).query_consumer_offset(req))


ROUTES = (
    ("GET", "/v1/topics", "topicList", topic_list),
    ("GET", "/v1/topics/route", "topicRoute", topic_route),
    ("POST", "/v1/topics/update", "updateTopic", update_topic),
    ("POST", "/v1/topics/delete", "deleteTopic", delete_topic),
    ("GET", "/v1/consumer-offsets", "queryConsumerOffset", query_consumer_offset),
    ("POST", "/v1/consumer-offsets/update", "updateConsumerOffset", update_consumer_offset),
)
"""(method, path, name, handler) as ``http_api.ROUTES``; the names are RocketMQ's mqadmin commands and
request codes (QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET)."""
