"""OpenAPI 3.1 description of the controller's HTTP API (served at ``/openapi.json``).

Request and payload schemas are generated from the wire structs of ``mqha.wire.controller_api`` by
``msgspec.json.schema_components`` (names, types, ranges, lengths, defaults), so they cannot drift from
what the server decodes; the route list must equal ``mqha.controller.http_api.ROUTES`` (a test checks
it). Each route's ``security`` and its 401/403 answers come from ``mqha.controller.access`` (what the
server enforces): broker routes take a signature or the admin token, admin routes the admin token.
"""

from __future__ import annotations

import functools
from typing import Any

from mqha.controller.openapi_acl import acl_operations
from mqha.controller.openapi_schema import (
    ASSET_PATH,
    BROKER_NAME_PATH,
    ENVELOPE,
    READ,
    SIGNATURE_SCHEME,
    TOKEN_SCHEME,
    WRITE,
    components,
    query_param,
    request_body,
    request_schema,
    responses,
    with_access,
)
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
    GroupsPayload,
    NextBrokerIdPayload,
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
                "responses": responses(("200",), ControllerMetadataPayload),
            },
        ),
        (
            "GET",
            "/v1/controller/config",
            "getControllerConfig",
            {
                "summary": "docs/reference-behaviour.md §5.11, any node: {config: {key: value}}; secrets "
                "masked",
                "responses": responses(("200",)),
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
                "requestBody": request_body(
                    {"type": "object", "additionalProperties": {"type": ["string", "integer", "boolean"]}}
                ),
                "responses": responses(("200", "400", "413", "500")),
            },
        ),
        (
            "GET",
            "/v1/controller/status",
            "getControllerStatus",
            {
                "summary": "Debug, any node: Raft status, this node's applied state (snapshot JSON) and "
                "heartbeat table",
                "responses": responses(("200",)),
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
                "responses": responses(("200",)),
            },
        ),
        (
            "GET",
            "/v1/controller/quorum",
            "getControllerQuorum",
            {
                "summary": "docs/raft.md §10, any node: {clusterId, self, role, leaderId, leaderRaftId, "
                "commitIndex, voters: [{raftId, apiAddress, storageId, connected, matchIndex}], observers}",
                "responses": responses(("200",)),
            },
        ),
        (
            "POST",
            "/v1/controller/peers/add",
            "addControllerPeer",
            {
                "summary": "docs/raft.md §10, leader, admin token: make a caught-up observer a voter "
                "(one change at a time); 503 code 14 while it catches up",
                "requestBody": request_body(request_schema(AddControllerPeerRequest)),
                "responses": responses(WRITE),
            },
        ),
        (
            "POST",
            "/v1/controller/peers/remove",
            "removeControllerPeer",
            {
                "summary": "docs/raft.md §10, leader, admin token: remove a voter by raftId or API "
                "address; the leader itself hands leadership over and answers 2007",
                "requestBody": request_body(request_schema(RemoveControllerPeerRequest)),
                "responses": responses(WRITE),
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
                    query_param("clusterName", "cluster", required=True),
                    query_param("brokerName", "broker set", required=True),
                ],
                "responses": responses(READ, NextBrokerIdPayload),
            },
        ),
        (
            "POST",
            "/v1/brokers/apply-id",
            "applyBrokerId",
            {
                "summary": "docs/reference-behaviour.md §5.2, leader: {clusterName, brokerName}",
                "requestBody": request_body(request_schema(ApplyBrokerIdRequest)),
                "responses": responses(WRITE, ApplyBrokerIdPayload),
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
                "requestBody": request_body(request_schema(RegisterBrokerRequest)),
                "responses": responses(WRITE, RegisterBrokerPayload),
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
                "requestBody": request_body(request_schema(BrokerHeartbeatRequest)),
                "responses": responses(("200", "400", "413")),
            },
        ),
        (
            "GET",
            "/v1/groups",
            "listGroups",
            {
                "summary": "Leader: broker sets known, by cluster: {clusters: {clusterName: [brokerName]}}",
                "responses": responses(READ, GroupsPayload),
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
                "parameters": [BROKER_NAME_PATH],
                "requestBody": request_body(request_schema(ElectMasterRequest, path_name)),
                "responses": responses(WRITE, ElectMasterPayload),
            },
        ),
        (
            "POST",
            "/v1/groups/{brokerName}/sync-state-set",
            "alterSyncStateSet",
            {
                "summary": "docs/reference-behaviour.md §5.5, leader: newSyncStateSetEpoch, syncStateSet, "
                "syncStateSetEpoch",
                "parameters": [BROKER_NAME_PATH],
                "requestBody": request_body(request_schema(AlterSyncStateSetRequest, path_name)),
                "responses": responses(WRITE, AlterSyncStateSetPayload),
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
                "parameters": [BROKER_NAME_PATH],
                "responses": responses(("200", "400", "404", "421", "503"), ReplicaInfoPayload),
            },
        ),
        (
            "POST",
            "/v1/groups/{brokerName}/clean",
            "cleanBrokerData",
            {
                "summary": "docs/reference-behaviour.md §5.10, leader, admin token",
                "parameters": [BROKER_NAME_PATH],
                "requestBody": request_body(request_schema(CleanBrokerDataRequest, path_name)),
                "responses": responses(WRITE),
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
                    query_param("brokerName", "broker sets (repeat the parameter)", many=True),
                    query_param("clusterName", "every broker set of this cluster"),
                ],
                "responses": responses(("200", "400", "421", "500", "503"), SyncStateDataPayload),
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
                "responses": responses(("200", "503")),
            },
        ),
        (
            "GET",
            "/livez",
            "livez",
            {
                "summary": "Liveness for Kubernetes: 200 while the process answers, damaged or not",
                "responses": responses(("200",)),
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
                "parameters": [ASSET_PATH],
                "responses": {
                    "200": {"description": "the file", "content": {"text/javascript": {}, "text/css": {}}},
                    **responses(("404",)),
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
                "responses": responses(("200", "400")),
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
                    **responses(("400", "401", "403")),
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
                "responses": responses(READ, TopicListPayload),
            },
        ),
        (
            "GET",
            "/v1/topics/route",
            "topicRoute",
            {
                "summary": "docs/architecture.md §4.5, leader: RocketMQ's TopicRouteData (brokerDatas, "
                "queueDatas) of the topic; 404 code 17 TOPIC_NOT_EXIST when no registered set holds it",
                "parameters": [query_param("topic", "the topic", required=True)],
                "responses": responses((*READ, "404"), TopicRoutePayload),
            },
        ),
        (
            "POST",
            "/v1/topics/update",
            "updateTopic",
            {
                "summary": "docs/architecture.md §4.5, leader, admin: create a topic or set its queues in "
                "every broker set of the cluster (mqadmin updateTopic)",
                "requestBody": request_body(request_schema(UpdateTopicRequest)),
                "responses": responses(WRITE, UpdateTopicPayload),
            },
        ),
        (
            "POST",
            "/v1/topics/delete",
            "deleteTopic",
            {
                "summary": "docs/architecture.md §4.5, leader, admin: remove a topic from every broker set "
                "of the cluster (mqadmin deleteTopic); an absent topic is success",
                "requestBody": request_body(request_schema(DeleteTopicRequest)),
                "responses": responses(WRITE),
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
                    query_param("consumerGroup", "the consumer group", required=True),
                    query_param("topic", "only this topic's offsets"),
                ],
                "responses": responses(READ, ConsumerOffsetsPayload),
            },
        ),
        (
            "POST",
            "/v1/consumer-offsets/update",
            "updateConsumerOffset",
            {
                "summary": "docs/architecture.md §13, leader, broker credentials (mqproxy): raise consumer "
                "groups' committed queue offsets (never lowered); answers every named queue's offset",
                "requestBody": request_body(request_schema(UpdateConsumerOffsetRequest)),
                "responses": responses(WRITE, ConsumerOffsetsPayload),
            },
        ),
        *acl_operations(),
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
            **with_access(method, op_id, operation),
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
            "schemas": {"Envelope": ENVELOPE, **components()},
            "securitySchemes": {"innerSignature": SIGNATURE_SCHEME, "adminToken": TOKEN_SCHEME},
        },
    }
