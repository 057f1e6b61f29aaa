"""docs/config.md, generated from the code's key tables (``mqha config-reference``; a test checks the
file against them, so the reference cannot drift from what the processes accept)."""

from __future__ import annotations

from collections.abc import Iterable

from mqha.broker.config import BROKER_CONFIG
from mqha.config import MAPPED, REFUSED, REQUIRED, ConfigSpec, Key
from mqha.controller.config import CONTROLLER_CONFIG
from mqha.proxy.config import PROXY_CONFIG

INTRO = """\
# mqha configuration reference

Generated from the key tables of `mqcontroller` (`mqha.controller.config`), `mqbroker`
(`mqha.broker.config`) and `mqproxy` (`mqha.proxy.config`) by `mqha config-reference > docs/config.md`;
`tests/unit/config/test_config_reference.py` fails when this page and the code disagree. Config files
are Java-properties text (docs/architecture.md §1).

Every key is one of:

- **used**: it does what RocketMQ's key does (or what the mqha column says);
- **mapped**: its value is translated to an mqha mechanism (the mqha column says which);
- **refused**: mqha has no such mechanism; any value but the default (or the values named) stops the process
  at start with one line, `config key '<key>': mqha does not support <key>=<value>: <what to use instead>`.

**runtime**: `yes` when a running process takes a change at once: `mqadmin updateControllerConfig`
(saved into `configStorePath`, read over the `-c` file at every start) or `mqadmin updateBrokerConfig`
(saved into the broker's `-c` file). A controller saves a change of any other key for its next start;
a broker refuses it (edit the file and restart). `mqcontroller -p` and `mqbroker -p` print every
effective value under `# from <file>` or `# from default`. Times are in milliseconds unless the unit
says otherwise.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def default_text(key: Key) -> str:
    if key.default_text:
        return key.default_text
    if key.default is REQUIRED:
        return "(required)"
    if isinstance(key.default, bool):
        return "true" if key.default else "false"
    if key.default == "":
        return '""'
    return str(key.default)


def support_text(key: Key) -> str:
    support = key.support
    if support.kind == REFUSED:
        accepted = [str(v) for v in support.accepted or ()]
        also = f" (or {', '.join(accepted)})" if accepted else ""
        head = f"refused unless the default{also}: {support.note}"
    elif support.kind == MAPPED:
        values = ", ".join(str(v) for v in support.accepted or ())
        only = f" (values {values}; others refused)" if values else ""
        head = f"mapped{only}: {support.note}"
    else:
        head = "used"
    if key.deviation:
        head += f"; {key.deviation}"
    if not key.rocketmq:
        head = "mqha's own key; " + head
    return head


def table(spec: ConfigSpec) -> str:
    lines = [
        "| key | default | unit | runtime | meaning | mqha |",
        "|---|---|---|---|---|---|",
    ]
    for key in spec.keys.values():
        listed = not key.choices or all(choice in key.doc for choice in key.choices)
        choices = "" if listed else f" ({' / '.join(key.choices)})"
        runtime = "yes" if key.runtime else "no"
        lines.append(
            f"| `{key.name}` | `{_cell(default_text(key))}` | {key.unit_text} | {runtime} "
            f"| {_cell(key.doc + choices)} | {_cell(support_text(key))} |"
        )
    return "\n".join(lines) + "\n"


def sections() -> Iterable[tuple[str, ConfigSpec]]:
    yield "mqcontroller (`-c controller.conf`)", CONTROLLER_CONFIG
    yield "mqbroker (`-c broker.conf`)", BROKER_CONFIG
    yield "mqproxy (`-c proxy.conf`)", PROXY_CONFIG


def reference() -> str:
    """The text of docs/config.md."""
    parts = [INTRO]
    for title, spec in sections():
        parts.append(f"\n## {title}\n\n{table(spec)}")
    return "".join(parts)
