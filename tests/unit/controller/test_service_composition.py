"""``ControllerService`` as a composition of one object per job (mqha/controller/service.py): the API names
``http_api``, ``sessions`` and ``__main__`` use land on the right job, and every job sees one config.
Nothing is started: no sockets, no Raft member, no loop."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from mqha.controller import (
    auth,
    config_store,
    liveness_watch,
    parts,
    role_changes,
    service,
    status_views,
    write_path,
)
from mqha.controller.config import CONTROLLER_CONFIG
from mqha.controller.service import ControllerService
from mqha.controller.sessions import SessionOwner

JOB_MODULES = [
    parts,
    write_path,
    liveness_watch,
    role_changes,
    config_store,
    auth,
    status_views,
    service,
]
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def built(tmp_path: Path) -> ControllerService:
    config = CONTROLLER_CONFIG.resolve(
        {
            "controllerDLegerPeers": "n0-127.0.0.1:9878;n1-127.0.0.1:9888",
            "controllerDLegerSelfId": "n0",
            "controllerStorePath": str(tmp_path / "store"),
            "configStorePath": str(tmp_path / "controller.properties"),
        }
    )
    return ControllerService(config)


def _service_calls(path: Path) -> set[str]:
    """Names called on the service in a module: ``service_of(request).X`` (also ``api.service_of``),
    ``service.X``."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute):
            target = node.value
            if (isinstance(target, ast.Name) and target.id == "service") or (
                isinstance(target, ast.Call)
                and (getattr(target.func, "id", "") or getattr(target.func, "attr", "")) == "service_of"
            ):
                names.add(node.attr)
    return names


def test_every_name_the_shells_call_is_on_the_service(built: ControllerService) -> None:
    shells = ("http_api", "topic_routes", "acl_routes", "history_route", "__main__")
    called = set().union(*(_service_calls(ROOT / f"mqha/controller/{name}.py") for name in shells))
    assert {"elect_master", "record_heartbeat", "console_snapshot", "begin_stop"} <= called
    missing = sorted(name for name in called if not hasattr(built, name))
    assert missing == []
    owner_methods = [name for name, _ in inspect.getmembers(SessionOwner) if not name.startswith("_")]
    assert all(callable(getattr(built, name)) for name in owner_methods)


def test_the_api_lands_on_the_job_that_owns_it(built: ControllerService) -> None:
    assert built.elect_master.__self__ is built.writes
    assert built.register_broker.__self__ is built.writes
    assert built.record_heartbeat.__self__ is built.liveness
    assert built.on_session_closed.__self__ is built.liveness
    assert built.update_config.__self__ is built.config_store
    assert built.auth.permit.__self__ is built.auth
    assert built.console_snapshot.__self__ is built.views
    assert built.writes._notify_role_change.__self__ is built.role_changes
    assert built.liveness.elect_master == built.writes.elect_master
    assert built.sessions is built.parts.sessions and built.console is built.parts.console


def test_a_config_update_is_seen_by_every_job(built: ControllerService) -> None:
    assert built.update_config({"electMasterMaxRetryCount": 7}).ok
    for job in (built.writes, built.liveness, built.role_changes, built.views, built.auth, built.parts):
        assert job.config["electMasterMaxRetryCount"] == 7
    assert built.max_message_bytes() == built.config_store.config["maxRequestBodyBytes"]


@pytest.mark.parametrize("module", JOB_MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_job_modules_are_small_and_each_class_names_its_job(module: object) -> None:
    source = inspect.getsource(module)  # type: ignore[arg-type]
    assert len(source.splitlines()) <= 500
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef):
            doc = ast.get_docstring(node)
            assert doc and doc.splitlines()[0].endswith("."), (
                f"{node.name}: first docstring line names its job"
            )
