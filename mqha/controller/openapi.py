"""OpenAPI 3.1 description of the controller's HTTP API (served at ``/openapi.json``).

Request and payload schemas are generated from the wire structs of ``mqha.wire.controller_api`` by
``msgspec.json.schema_components`` (names, types, ranges, lengths, defaults), so they cannot drift from
what the server decodes; the route list must equal ``mqha.controller.http_api.ROUTES`` (a test checks
it). Each route's ``security`` and its 401/403 answers come from ``mqha.controller.access`` (what the
server enforces): broker routes take a signature or the admin token, admin routes the admin token.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import msgspec

from mqha.codes import ResponseCode
from mqha.controller.access import Access, route_access
from mqha.wire import acl_api
from mqha.wire.controller_api import (
    AlterSyncStateSetPayload,
    AlterSyncStateSetRequest,
    ApplyBrokerIdPayload,
    ApplyBrokerIdRequest,
    BrokerHeartbeatRequest,
    CleanBrokerDataRequest,
    ControllerMetadataPayload,
    DeleteTopicRequest,
    ElectMasterPayload,
    ElectMasterRequest,
    GetNextBrokerIdRequest,
    GetSyncStateDataRequest,
    GroupsPayload,
    NextBrokerIdPayload,
    NotLeaderPayload,
    RegisterBrokerPayload,
    RegisterBrokerRequest,
    ReplicaInfoPayload,
    SyncStateDataPayload,
    TopicListPayload,
    TopicRoutePayload,
    UpdateTopicPayload,
    UpdateTopicRequest,
)
from mqha.wire.controller_quorum import AddControllerPeerRequest, RemoveControllerPeerRequest
from mqha.wire.offsets_api import ConsumerOffsetsPayload, UpdateConsumerOffsetRequest

ACL_MESSAGES = (
    acl_api.UserRequest,
    acl_api.UsersPayload,
    acl_api.PutAclRequest,
    acl_api.DeleteAclRequest,
    acl_api.AclsPayload,
    acl_api.AclBookPayload,
)
"""The ACL routes' bodies (``mqha.controller.acl_routes``)."""


_REF = "#/components/schemas/{name}"
_MESSAGES: tuple[type[msgspec.Struct], ...] = (
    ApplyBrokerIdRequest,
    RegisterBrokerRequest,
    BrokerHeartbeatRequest,
    ElectMasterRequest,
    AlterSyncStateSetRequest,
    CleanBrokerDataRequest,
    AddControllerPeerRequest,
    RemoveControllerPeerRequest,
    GetNextBrokerIdRequest,
    GetSyncStateDataRequest,
    NextBrokerIdPayload,
    ApplyBrokerIdPayload,
    RegisterBrokerPayload,
    ElectMasterPayload,
    AlterSyncStateSetPayload,
    ReplicaInfoPayload,
    SyncStateDataPayload,
    NotLeaderPayload,
    ControllerMetadataPayload,
    GroupsPayload,
    UpdateTopicRequest,
    DeleteTopicRequest,
    UpdateTopicPayload,
    TopicListPayload,
    TopicRoutePayload,
    UpdateConsumerOffsetRequest,
    ConsumerOffsetsPayload,
    *ACL_MESSAGES,
)


@functools.cache
def _components() -> dict[str, Any]:
    _, components = msgspec.json.schema_components(_MESSAGES, ref_template=_REF)
    # Through JSON once: defaults such as ``()`` become the lists the served document holds.
    result: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(components))
    return result


def request_schema(cls: type[msgspec.Struct], path_fields: tuple[str, ...] = ()) -> dict[str, Any]:
    """JSON schema of a strict request struct (no additional properties); ``path_fields`` are also
    path parameters."""
    schema = copy.deepcopy(_components()[cls.__name__])
    for name in path_fields:
        schema["properties"][name]["description"] = "optional; must equal the path parameter"
    return schema


def _payload(cls: type[msgspec.Struct]) -> dict[str, Any]:
    return {"allOf": [{"$ref": _REF.format(name="Envelope")}, {"$ref": _REF.format(name=cls.__name__)}]}


_ENVELOPE = {
    "type": "object",
    "required": ["code", "codeName", "remark"],
    "properties": {
        "code": {"type": "integer", "description": "RocketMQ response code"},
        "codeName": {"type": "string", "enum": [code.name for code in ResponseCode]},
        "remark": {"type": "string"},
        "leaderAddress": {
            "type": ["string", "null"],
            "description": "with code 2007: the leader's API address, null when unknown",
        },
    },
    "additionalProperties": True,
}

_STATUS_TEXT = {
    "200": "success (code 0)",
    "400": "invalid request: malformed JSON, wrong type, missing or unknown field (code 2005)",
    "401": "no proof: no, a malformed, a wrong, an expired or a replayed signature, or an admin call "
    "without a bearer token (code 16)",
    "403": "wrong admin token, broker credentials on an admin call, or a blacklisted config key (code 16)",
    "404": "unknown broker set (2008, 2010) or topic (17 TOPIC_NOT_EXIST)",
    "409": "fenced or rejected (2000-2004, 2006, 2009, 2011-2014)",
    "413": "body larger than maxRequestBodyBytes (code 2005)",
    "421": "not the serving leader (2007); leaderAddress names the leader",
    "500": "system error (code 1)",
    "503": "no quorum, or the outcome of a write is unknown (code 14)",
}
_READ = ("200", "400", "421", "503")
_WRITE = ("200", "400", "404", "409", "413", "421", "503")


def _responses(statuses: tuple[str, ...], payload: type[msgspec.Struct] | None = None) -> dict[str, Any]:
    """Responses by HTTP status: the envelope, plus ``payload``'s fields on 200 (and the leader's
    address on 421)."""
    envelope = {"$ref": _REF.format(name="Envelope")}
    schemas = {"200": _payload(payload) if payload else envelope, "421": _payload(NotLeaderPayload)}
    return {
        status: {
            "description": _STATUS_TEXT[status],
            "content": {"application/json": {"schema": schemas.get(status, envelope)}},
        }
        for status in statuses
    }


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def _query_param(name: str, description: str, required: bool = False, many: bool = False) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    if many:
        schema = {"type": "array", "items": {"type": "string"}}
    return {
        "name": name,
        "in": "query",
        "required": required,
        "description": description,
        "schema": schema,
        "explode": True,
    }


_BROKER_NAME_PATH = {"name": "brokerName", "in": "path", "required": True, "schema": {"type": "string"}}
_ASSET_PATH = {"name": "asset", "in": "path", "required": True, "schema": {"type": "string"}}
_SECURITY = {
    Access.BROKER: [{"innerSignature": []}, {"adminToken": []}],
    Access.ADMIN: [{"adminToken": []}],
}
_SIGNATURE_SCHEME = {
    "type": "apiKey",
    "in": "header",
    "name": "Authorization",
    "description": "With authenticationEnabled: 'MQHA-HMAC-SHA256 AccessKey=<accessKey>, Timestamp=<ms>, "
    "Nonce=<random>, Signature=<hex HMAC-SHA256(secretKey, METHOD\\npath?raw-query\\ntimestamp\\nnonce"
    "\\nsha256-hex(body))>' by innerClientAuthenticationCredentials; within 60 s of the server's clock, "
    "each nonce once. Without authenticationEnabled broker routes are open.",
}
_TOKEN_SCHEME = {
    "type": "http",
    "scheme": "bearer",
    "description": "adminAuthToken: required by admin routes when set (always with authenticationEnabled)",
}


def _with_access(method: str, op_id: str, operation: dict[str, Any]) -> dict[str, Any]:
    """``operation`` with the security the server enforces on it and its 401/403 answers."""
    required = route_access(method, op_id)
    if required is Access.OPEN:
        return operation
    refusals = _responses(("401", "403"))
    return {**operation, "security": _SECURITY[required], "responses": {**operation["responses"], **refusals}}


def _operations() -> list[tuple[str, str, str, dict[str, Any]]]:
    """(method, path, operationId, operation) for every route."""
    path_name = ("brokerName",)
    return [
        (
            "GET",
            "/v1/controller/metadata",
            "getControllerMetadata",
            {
                "summary": "docs/reference-behaviour.md §5.8, any node: group, leaderId, leaderAddress "
                "(API), isLeader, peers "
                "('id:address;' repeated), selfId, selfAddress",
                "responses": _responses(("200",), ControllerMetadataPayload),
            },
        ),
        (
            "GET",
            "/v1/controller/config",
            "getControllerConfig",
            {
                "summary": "docs/reference-behaviour.md §5.11, any node: {config: {key: value}}; secrets "
                "masked",
                "responses": _responses(("200",)),
            },
        ),
        (
            "PUT",
            "/v1/controller/config",
            "updateControllerConfig",
            {
                "summary": "docs/reference-behaviour.md §5.11, this node only: {key: value}; typed, "
                "validated, persisted to "
                "configStorePath. Blacklisted keys: 403 code 16. Keys that need a restart are named "
                "in the remark.",
                "requestBody": _body(
                    {"type": "object", "additionalProperties": {"type": ["string", "integer", "boolean"]}}
                ),
                "responses": _responses(("200", "400", "413", "500")),
            },
        ),
        (
            "GET",
            "/v1/controller/status",
            "getControllerStatus",
            {
                "summary": "Debug, any node: Raft status, this node's applied state (snapshot JSON) and "
                "heartbeat table",
                "responses": _responses(("200",)),
            },
        ),
        (
            "GET",
            "/v1/controller/storage",
            "getControllerStorage",
            {
                "summary": "docs/raft.md §10, any node, also while starting: this store's identity "
                "{nodeId, storageId, raftId, role (pending|voter|observer), clusterId, "
                "bootstrapVoters, voters}",
                "responses": _responses(("200",)),
            },
        ),
        (
            "GET",
            "/v1/controller/quorum",
            "getControllerQuorum",
            {
                "summary": "docs/raft.md §10, any node: {clusterId, self, role, leaderId, leaderRaftId, "
                "commitIndex, voters: [{raftId, apiAddress, storageId, connected, matchIndex}], observers}",
                "responses": _responses(("200",)),
            },
        ),
        (
            "POST",
            "/v1/controller/peers/add",
            "addControllerPeer",
            {
                "summary": "docs/raft.md §10, leader, admin token: make a caught-up observer a voter "
                "(one change at a time); 503 code 14 while it catches up",
                "requestBody": _body(request_schema(AddControllerPeerRequest)),
                "responses": _responses(_WRITE),
            },
        ),
        (
            "POST",
            "/v1/controller/peers/remove",
            "removeControllerPeer",
            {
                "summary": "docs/raft.md §10, leader, admin token: remove a voter by raftId or API "
                "address; the leader itself hands leadership over and answers 2007",
                "requestBody": _body(request_schema(RemoveControllerPeerRequest)),
                "responses": _responses(_WRITE),
            },
        ),
        (
            "GET",
            "/v1/brokers/next-id",
            "getNextBrokerId",
            {
                "summary": "docs/reference-behaviour.md §5.1, leader: {clusterName, brokerName, "
                "nextBrokerId}",
                "parameters": [
                    _query_param("clusterName", "cluster", required=True),
                    _query_param("brokerName", "broker set", required=True),
                ],
                "responses": _responses(_READ, NextBrokerIdPayload),
            },
        ),
        (
            "POST",
            "/v1/brokers/apply-id",
            "applyBrokerId",
            {
                "summary": "docs/reference-behaviour.md §5.2, leader: {clusterName, brokerName}",
                "requestBody": _body(request_schema(ApplyBrokerIdRequest)),
                "responses": _responses(_WRITE, ApplyBrokerIdPayload),
            },
        ),
        (
            "POST",
            "/v1/brokers/register",
            "registerBroker",
            {
                "summary": "docs/reference-behaviour.md §5.3, leader: master fields (null unless a live "
                "master), "
                "masterHaAddress, syncStateSet",
                "requestBody": _body(request_schema(RegisterBrokerRequest)),
                "responses": _responses(_WRITE, RegisterBrokerPayload),
            },
        ),
        (
            "GET",
            "/v1/brokers/session",
            "brokerSession",
            {
                "summary": "WebSocket (any node). In: heartbeat JSON objects (fields of "
                "POST /v1/brokers/heartbeat, optional type 'heartbeat'), no reply on success, "
                "{type: 'error', code, codeName, remark} on a bad one. Out: {type: 'roleChanged', "
                "clusterName, brokerName, masterBrokerId, masterAddress, masterHaAddress, masterEpoch, "
                "syncStateSetEpoch, syncStateSet}. Closing the session of the master makes the "
                "leader elect at once.",
                "responses": {"101": {"description": "switching protocols"}},
            },
        ),
        (
            "POST",
            "/v1/brokers/heartbeat",
            "brokerHeartbeat",
            {
                "summary": "docs/reference-behaviour.md §5.9, any node (soft state of that node)",
                "requestBody": _body(request_schema(BrokerHeartbeatRequest)),
                "responses": _responses(("200", "400", "413")),
            },
        ),
        (
            "GET",
            "/v1/groups",
            "listGroups",
            {
                "summary": "Leader: broker sets known, by cluster: {clusters: {clusterName: [brokerName]}}",
                "responses": _responses(_READ, GroupsPayload),
            },
        ),
        (
            "POST",
            "/v1/groups/{brokerName}/elect",
            "electMaster",
            {
                "summary": "docs/reference-behaviour.md §5.4, leader: masterBrokerId, masterAddress, "
                "masterHaAddress, masterEpoch, "
                "syncStateSetEpoch, syncStateSet, brokerMemberGroup. No brokerId = controller-style "
                "trigger; designateElect needs the admin token (a broker's signature is not enough).",
                "parameters": [_BROKER_NAME_PATH],
                "requestBody": _body(request_schema(ElectMasterRequest, path_name)),
                "responses": _responses(_WRITE, ElectMasterPayload),
            },
        ),
        (
            "POST",
            "/v1/groups/{brokerName}/sync-state-set",
            "alterSyncStateSet",
            {
                "summary": "docs/reference-behaviour.md §5.5, leader: newSyncStateSetEpoch, syncStateSet, "
                "syncStateSetEpoch",
                "parameters": [_BROKER_NAME_PATH],
                "requestBody": _body(request_schema(AlterSyncStateSetRequest, path_name)),
                "responses": _responses(_WRITE, AlterSyncStateSetPayload),
            },
        ),
        (
            "GET",
            "/v1/groups/{brokerName}/replica-info",
            "getReplicaInfo",
            {
                "summary": "docs/reference-behaviour.md §5.6, leader: masterBrokerId, masterAddress, "
                "masterHaAddress, masterEpoch, "
                "syncStateSet, syncStateSetEpoch",
                "parameters": [_BROKER_NAME_PATH],
                "responses": _responses(("200", "400", "404", "421", "503"), ReplicaInfoPayload),
            },
        ),
        (
            "POST",
            "/v1/groups/{brokerName}/clean",
            "cleanBrokerData",
            {
                "summary": "docs/reference-behaviour.md §5.10, leader, admin token",
                "parameters": [_BROKER_NAME_PATH],
                "requestBody": _body(request_schema(CleanBrokerDataRequest, path_name)),
                "responses": _responses(_WRITE),
            },
        ),
        (
            "GET",
            "/v1/sync-state-data",
            "getSyncStateData",
            {
                "summary": "docs/reference-behaviour.md §5.7, leader: {replicasInfoTable: {brokerName: "
                "{masterBrokerId, "
                "masterAddress, masterEpoch, syncStateSetEpoch, inSyncReplicas, notInSyncReplicas}}}; "
                "no name and no cluster: code 1 (as the reference)",
                "parameters": [
                    _query_param("brokerName", "broker sets (repeat the parameter)", many=True),
                    _query_param("clusterName", "every broker set of this cluster"),
                ],
                "responses": _responses(("200", "400", "421", "500", "503"), SyncStateDataPayload),
            },
        ),
        (
            "GET",
            "/metrics",
            "metrics",
            {
                "summary": "Prometheus text exposition (mqha_controller_* metrics)",
                "responses": {"200": {"description": "metrics", "content": {"text/plain": {}}}},
            },
        ),
        (
            "GET",
            "/healthz",
            "healthz",
            {
                "summary": (
                    "Readiness: 200 while the process and its Raft thread run and its Raft state is not "
                    "damaged, else 503 (remark and `damage` say why)"
                ),
                "responses": _responses(("200", "503")),
            },
        ),
        (
            "GET",
            "/livez",
            "livez",
            {
                "summary": "Liveness for Kubernetes: 200 while the process answers, damaged or not",
                "responses": _responses(("200",)),
            },
        ),
        (
            "GET",
            "/openapi.json",
            "openapi",
            {"summary": "This document", "responses": {"200": {"description": "OpenAPI 3.1 JSON"}}},
        ),
        (
            "GET",
            "/",
            "consoleIndex",
            {
                "summary": "The web console (any node): a single page reading /v1/console/events; admin "
                "actions call electMaster and cleanBrokerData with the bearer token the user types",
                "responses": {"200": {"description": "HTML page", "content": {"text/html": {}}}},
            },
        ),
        (
            "GET",
            "/console/{asset}",
            "consoleAsset",
            {
                "summary": "The console's script and style sheet (app.js, style.css); others 404 code 3",
                "parameters": [_ASSET_PATH],
                "responses": {
                    "200": {"description": "the file", "content": {"text/javascript": {}, "text/css": {}}},
                    **_responses(("404",)),
                },
            },
        ),
        (
            "GET",
            "/v1/console/events",
            "consoleEvents",
            {
                "summary": "Server-sent events, any node: a 'snapshot' event at once and after each change "
                "(applied record, leadership, broker session closed; soft state re-checked every 0.5 s). "
                "Data: {node: {nodeId, address, isLeader, leaderId, leaderAddress, term, commitIndex, "
                "lastApplied, healthy}, controllers: [{nodeId, address, isSelf, isLeader, reachable}], "
                "appliedIndex, clusters: {clusterName: [brokerName]}, groups: [{clusterName, brokerName, "
                "masterBrokerId, masterAddress, masterEpoch, syncStateSet, syncStateSetEpoch, replicas: "
                "[{brokerId, brokerAddress, haAddress, isMaster, inSync, alive, epoch, maxOffset, "
                "confirmOffset, lag}]}], timeline: [{raftIndex, ts, type, brokerName, accepted, codeName, "
                "remark, unclean, masterBrokerId, masterEpoch, syncStateSet, syncStateSetEpoch}]}. "
                "Liveness and offsets are the serving node's heartbeat table.",
                "responses": {"200": {"description": "event stream", "content": {"text/event-stream": {}}}},
            },
        ),
        (
            "GET",
            "/v1/console/analysis",
            "consoleAnalysis",
            {
                "summary": "Any node: {configured, reportDir, report, error}; report is the verdict.json of "
                "consoleAnalysisReportDir as {ok, failed, source, engine, tables, checks: [{name, failure, "
                "description, count, rows}]} (violated checks first)",
                "responses": _responses(("200", "400")),
            },
        ),
        (
            "GET",
            "/v1/history/rows",
            "getHistoryRows",
            {
                "summary": "Admin: one page of this node's history.db for mqha export (docs/architecture.md "
                "§5): query table, afterSeq (default 0), limit (1..50000, default 50000); NDJSON, one "
                "typed row per line with seq (the rowid) in rowid order; a page shorter than limit is "
                "the last",
                "responses": {
                    "200": {"description": "NDJSON rows", "content": {"application/x-ndjson": {}}},
                    **_responses(("400", "401", "403")),
                },
            },
        ),
        (
            "GET",
            "/v1/topics",
            "topicList",
            {
                "summary": "docs/architecture.md §4.5, leader: every topic (topicList), its queues in the "
                "registered broker sets (topicQueues) and their clusters",
                "responses": _responses(_READ, TopicListPayload),
            },
        ),
        (
            "GET",
            "/v1/topics/route",
            "topicRoute",
            {
                "summary": "docs/architecture.md §4.5, leader: RocketMQ's TopicRouteData (brokerDatas, "
                "queueDatas) of the topic; 404 code 17 TOPIC_NOT_EXIST when no registered set holds it",
                "parameters": [_query_param("topic", "the topic", required=True)],
                "responses": _responses((*_READ, "404"), TopicRoutePayload),
            },
        ),
        (
            "POST",
            "/v1/topics/update",
            "updateTopic",
            {
                "summary": "docs/architecture.md §4.5, leader, admin: create a topic or set its queues in "
                "every broker set of the cluster (mqadmin updateTopic)",
                "requestBody": _body(request_schema(UpdateTopicRequest)),
                "responses": _responses(_WRITE, UpdateTopicPayload),
            },
        ),
        (
            "POST",
            "/v1/topics/delete",
            "deleteTopic",
            {
                "summary": "docs/architecture.md §4.5, leader, admin: remove a topic from every broker set "
                "of the cluster (mqadmin deleteTopic); an absent topic is success",
                "requestBody": _body(request_schema(DeleteTopicRequest)),
                "responses": _responses(_WRITE),
            },
        ),
        (
            "GET",
            "/v1/consumer-offsets",
            "queryConsumerOffset",
            {
                "summary": "docs/architecture.md §13, leader: a consumer group's committed queue offsets "
                "(in one topic, or in all)",
                "parameters": [
                    _query_param("consumerGroup", "the consumer group", required=True),
                    _query_param("topic", "only this topic's offsets"),
                ],
                "responses": _responses(_READ, ConsumerOffsetsPayload),
            },
        ),
        (
            "POST",
            "/v1/consumer-offsets/update",
            "updateConsumerOffset",
            {
                "summary": "docs/architecture.md §13, leader, broker credentials (mqproxy): raise consumer "
                "groups' committed queue offsets (never lowered); answers every named queue's offset",
                "requestBody": _body(request_schema(UpdateConsumerOffsetRequest)),
                "responses": _responses(_WRITE, ConsumerOffsetsPayload),
            },
        ),
        *_acl_operations(),
    ]


def _acl_write_operation(summary: str, cls: type[Any]) -> dict[str, Any]:
    return {
        "summary": f"docs/architecture.md §12.11, leader, admin: {summary}",
        "requestBody": _body(request_schema(cls)),
        "responses": _responses(_WRITE),
    }


def _acl_read_operation(summary: str, parameters: list[dict[str, Any]], payload: type[Any]) -> dict[str, Any]:
    return {"summary": summary, "parameters": parameters, "responses": _responses(_READ, payload)}


def _acl_operations() -> list[tuple[str, str, str, dict[str, Any]]]:
    """The ACL routes' operations (``mqha.controller.acl_routes``)."""
    user, put, delete = acl_api.UserRequest, acl_api.PutAclRequest, acl_api.DeleteAclRequest
    users = _acl_read_operation(
        "docs/architecture.md §12.11, leader, admin: getUser / listUser, never a password",
        [_query_param("username", "one user (getUser)"), _query_param("filter", "names containing this")],
        acl_api.UsersPayload,
    )
    policies = _acl_read_operation(
        "docs/architecture.md §12.11, leader, admin: getAcl / listAcl",
        [
            _query_param("subject", "User:NAME (getAcl, listAcl -s)"),
            _query_param("resource", "only policies with an entry of this resource (listAcl -r)"),
        ],
        acl_api.AclsPayload,
    )
    book = _acl_read_operation(
        "docs/architecture.md §12.11, leader, broker credentials (mqproxy): every user with its sealed "
        "password and every policy",
        [],
        acl_api.AclBookPayload,
    )
    return [
        (
            "POST",
            "/v1/acl/users/create",
            "createUser",
            _acl_write_operation("createUser (-u -p -t), sealed", user),
        ),
        (
            "POST",
            "/v1/acl/users/update",
            "updateUser",
            _acl_write_operation("updateUser (-u [-p] [-t])", user),
        ),
        (
            "POST",
            "/v1/acl/users/delete",
            "deleteUser",
            _acl_write_operation("deleteUser (-u) and its policy", user),
        ),
        ("GET", "/v1/acl/users", "listUser", users),
        (
            "POST",
            "/v1/acl/policies/create",
            "createAcl",
            _acl_write_operation("createAcl (-s -r -a -d [-i])", put),
        ),
        (
            "POST",
            "/v1/acl/policies/update",
            "updateAcl",
            _acl_write_operation("updateAcl (-s -r -a -d [-i])", put),
        ),
        ("POST", "/v1/acl/policies/delete", "deleteAcl", _acl_write_operation("deleteAcl (-s [-r])", delete)),
        ("GET", "/v1/acl/policies", "listAcl", policies),
        ("GET", "/v1/acl/book", "getAclBook", book),
    ]


def route_list() -> list[tuple[str, str, str]]:
    """(method, path, operationId) of every documented route."""
    return [(method, path, op_id) for method, path, op_id, _ in _operations()]


@functools.cache
def document() -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for method, path, op_id, operation in _operations():
        paths.setdefault(path, {})[method.lower()] = {
            "operationId": op_id,
            **_with_access(method, op_id, operation),
        }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "mqha controller API",
            "version": "1",
            "description": "RocketMQ 5 controller-mode API over HTTP/JSON (docs/architecture.md §3). "
            "Every JSON answer is {code, codeName, remark, ...payload}.",
        },
        "paths": paths,
        "components": {
            "schemas": {"Envelope": _ENVELOPE, **_components()},
            "securitySchemes": {"innerSignature": _SIGNATURE_SCHEME, "adminToken": _TOKEN_SCHEME},
        },
    }
