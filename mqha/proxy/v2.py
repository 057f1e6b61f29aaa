"""The generated ``apache.rocketmq.v2`` protocol modules, taken from the pinned official client (data).

``rocketmq-python-client`` (``mqha[proxy]``) ships them as ``rocketmq.grpc_protocol.*_pb2``. Its
package ``__init__`` starts importing the whole client (opentelemetry and 130 more modules), and the
generated files import each other through that package name, so this module registers the two
package levels as bare path holders and imports only the three generated files through them. One
process must hold one generated copy of these protos (a second copy fails with "duplicate symbol"),
which is why the official clients in the tests run in their own processes.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

from mqha.extras import require_extra


def _hold_package(name: str, path: str) -> None:
    """``name`` in ``sys.modules`` as a package that only finds its submodules (runs no ``__init__``)."""
    if name in sys.modules:
        return
    module = types.ModuleType(name)
    module.__path__ = [path]
    sys.modules[name] = module


def _load() -> tuple[types.ModuleType, types.ModuleType, types.ModuleType]:
    require_extra("proxy", "rocketmq", "for mqproxy's gRPC protocol (rocketmq-python-client)")
    root = importlib.util.find_spec("rocketmq")
    assert root is not None and root.submodule_search_locations
    base = next(iter(root.submodule_search_locations))
    _hold_package("rocketmq", base)
    _hold_package("rocketmq.grpc_protocol", f"{base}/grpc_protocol")
    return (
        importlib.import_module("rocketmq.grpc_protocol.definition_pb2"),
        importlib.import_module("rocketmq.grpc_protocol.service_pb2"),
        importlib.import_module("rocketmq.grpc_protocol.service_pb2_grpc"),
    )


definition, service, service_grpc = _load()
"""``definition_pb2`` (Message, Settings, Code, ...), ``service_pb2`` (requests and responses) and
``service_pb2_grpc`` (``MessagingServiceServicer``, ``add_MessagingServiceServicer_to_server``)."""
