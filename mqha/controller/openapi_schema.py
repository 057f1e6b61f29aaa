"""The parts of the controller API's OpenAPI description (``mqha.controller.openapi``): the schemas of
every request and payload, generated from the wire structs by ``msgspec.json.schema_components``, the
answer envelope, responses by HTTP status, parameters, and the security schemes with the access each
route needs (``mqha.controller.access``).
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

REF = "#/components/schemas/{name}"
MESSAGES: tuple[type[msgspec.Struct], ...] = (
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
    *acl_api.MESSAGES,
)


@functools.cache
def components() -> dict[str, Any]:
    _, components = msgspec.json.schema_components(MESSAGES, ref_template=REF)
    # Through JSON once: defaults such as ``()`` become the lists the served document holds.
    result: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(components))
    return result


def request_schema(cls: type[msgspec.Struct], path_fields: tuple[str, ...] = ()) -> dict[str, Any]:
    """JSON schema of a strict request struct (no additional properties); ``path_fields`` are also
    path parameters."""
    schema = copy.deepcopy(components()[cls.__name__])
    for name in path_fields:
        schema["properties"][name]["description"] = "optional; must equal the path parameter"
    return schema


def payload_schema(cls: type[msgspec.Struct]) -> dict[str, Any]:
    return {"allOf": [{"$ref": REF.format(name="Envelope")}, {"$ref": REF.format(name=cls.__name__)}]}


ENVELOPE = {
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

STATUS_TEXT = {
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
READ = ("200", "400", "421", "503")
WRITE = ("200", "400", "404", "409", "413", "421", "503")


def responses(statuses: tuple[str, ...], payload: type[msgspec.Struct] | None = None) -> dict[str, Any]:
    """Responses by HTTP status: the envelope, plus ``payload``'s fields on 200 (and the leader's
    address on 421)."""
    envelope = {"$ref": REF.format(name="Envelope")}
    schemas = {
        "200": payload_schema(payload) if payload else envelope,
        "421": payload_schema(NotLeaderPayload),
    }
    return {
        status: {
            "description": STATUS_TEXT[status],
            "content": {"application/json": {"schema": schemas.get(status, envelope)}},
        }
        for status in statuses
    }


def request_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def query_param(name: str, description: str, required: bool = False, many: bool = False) -> dict[str, Any]:
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


BROKER_NAME_PATH = {"name": "brokerName", "in": "path", "required": True, "schema": {"type": "string"}}
ASSET_PATH = {"name": "asset", "in": "path", "required": True, "schema": {"type": "string"}}
SECURITY = {
    Access.BROKER: [{"innerSignature": []}, {"adminToken": []}],
    Access.ADMIN: [{"adminToken": []}],
}
SIGNATURE_SCHEME = {
    "type": "apiKey",
    "in": "header",
    "name": "Authorization",
    "description": "With authenticationEnabled: 'MQHA-HMAC-SHA256 AccessKey=<accessKey>, Timestamp=<ms>, "
    "Nonce=<random>, Signature=<hex HMAC-SHA256(secretKey, METHOD\\npath?raw-query\\ntimestamp\\nnonce"
    "\\nsha256-hex(body))>' by innerClientAuthenticationCredentials; within 60 s of the server's clock, "
    "each nonce once. Without authenticationEnabled broker routes are open.",
}
TOKEN_SCHEME = {
    "type": "http",
    "scheme": "bearer",
    "description": "adminAuthToken: required by admin routes when set (always with authenticationEnabled)",
}


def with_access(method: str, op_id: str, operation: dict[str, Any]) -> dict[str, Any]:
    """``operation`` with the security the server enforces on it and its 401/403 answers."""
    required = route_access(method, op_id)
    if required is Access.OPEN:
        return operation
    refusals = responses(("401", "403"))
    return {**operation, "security": SECURITY[required], "responses": {**operation["responses"], **refusals}}
