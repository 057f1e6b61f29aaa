"""Response codes, named and numbered as RocketMQ's ``ResponseCode`` (docs/reference-behaviour.md §2.2, 5.1.1+
values)."""

from enum import IntEnum


class ResponseCode(IntEnum):
    """Names RocketMQ's response codes with their numbers (docs/reference-behaviour.md §2.2)."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    SERVICE_NOT_AVAILABLE = 14
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17

    CONTROLLER_FENCED_MASTER_EPOCH = 2000
    CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = 2001
    CONTROLLER_INVALID_MASTER = 2002
    CONTROLLER_INVALID_REPLICAS = 2003
    CONTROLLER_MASTER_NOT_AVAILABLE = 2004
    CONTROLLER_INVALID_REQUEST = 2005
    CONTROLLER_BROKER_NOT_ALIVE = 2006
    CONTROLLER_NOT_LEADER = 2007
    CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008
    CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 2009
    CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 2010
    CONTROLLER_MASTER_STILL_EXIST = 2011
    CONTROLLER_ELECT_MASTER_FAILED = 2012
    CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 2013
    CONTROLLER_BROKER_ID_INVALID = 2014


_HTTP_STATUS_BY_CODE: dict[ResponseCode, int] = {
    ResponseCode.SUCCESS: 200,
    ResponseCode.CONTROLLER_INVALID_REQUEST: 400,
    ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST: 404,
    ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED: 404,
    ResponseCode.CONTROLLER_NOT_LEADER: 421,
    ResponseCode.NO_PERMISSION: 403,
    ResponseCode.TOPIC_NOT_EXIST: 404,
    ResponseCode.SERVICE_NOT_AVAILABLE: 503,
    ResponseCode.SYSTEM_BUSY: 503,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: 400,
    ResponseCode.SYSTEM_ERROR: 500,
}


def http_status_for(code: ResponseCode) -> int:
    """HTTP status of a response code (docs/architecture.md §3): fenced or rejected controller codes are
    409."""
    if code in _HTTP_STATUS_BY_CODE:
        return _HTTP_STATUS_BY_CODE[code]
    if 2000 <= code <= 2016:
        return 409
    return 500
