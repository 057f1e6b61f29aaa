"""The compiled codec (``mqha/broker/commitlog/_native.c``) against the pure-Python codec, its definition.

* the extension is built and active (a silent fallback would only show as a slow benchmark);
* its CRC32 is zlib's;
* ``CommitLog._encode`` gives the same units, results and msgIds with and without ``encode_run``,
  for any drafts (odd field types, bad bounds, segment ends);
* ``scan_units`` gives the same ``Scan`` with and without ``skip_messages``, for valid logs and for
  logs with a byte flipped, a tail cut, or a window, under every flag combination;
* ``message_walk``, when it answers, answers ``scan_units``' end.
"""

import os
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqha.broker.commitlog import CommitLog, MessageDraft, scanning, store
from mqha.broker.commitlog.codec import InvalidDraft
from mqha.broker.commitlog.native import NATIVE, NATIVE_STATUS, PURE_PYTHON_ENV
from mqha.broker.commitlog.scanning import Scan, ScanStop, message_walk, scan_units

pytestmark = pytest.mark.skipif(
    os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"), reason=f"{PURE_PYTHON_ENV} is set"
)
TS = 1_700_000_000_000
SETTINGS = settings(max_examples=150, deadline=None)
SEGMENT = 4096

text = st.text(st.characters(codec="utf-8", exclude_characters="\x01\x02"), max_size=8)


plain_drafts = st.builds(
    MessageDraft,
    topic=st.text(st.characters(codec="utf-8"), min_size=1, max_size=6),
    body=st.binary(max_size=600),
    msg_id=st.one_of(st.none(), st.text(st.characters(codec="ascii"), min_size=1, max_size=34)),
    keys=text,
    properties=st.one_of(st.none(), st.dictionaries(text.filter(bool), text, max_size=3)),
    born_ts=st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
)


@st.composite
def odd_drafts(draw: st.DrawFn) -> MessageDraft:
    """Drafts the compiled path must hand back to Python (or that Python rejects)."""
    return MessageDraft(
        topic=draw(st.one_of(st.text(max_size=6), st.just("T" * 300))),
        body=draw(st.one_of(st.binary(max_size=600), st.builds(bytearray, st.binary(max_size=20)))),
        msg_id=draw(st.one_of(st.none(), st.just(""), st.text(max_size=34), st.just("M" * 256))),
        keys=draw(st.one_of(text, st.just("\ud800"))),
        properties=draw(
            st.one_of(st.none(), st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3))
        ),
        born_ts=draw(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.just(2**64), st.just(True))),
    )


any_drafts = st.one_of(plain_drafts, plain_drafts, plain_drafts, odd_drafts())


def test_the_compiled_codec_is_built_and_active() -> None:
    assert NATIVE is not None, f"{NATIVE_STATUS}; run scripts/setup.sh (it needs gcc and Python headers)"


@given(st.binary(max_size=3000), st.integers(0, 2**32 - 1))
def test_crc32_is_zlibs(data: bytes, seed: int) -> None:
    assert NATIVE is not None
    assert NATIVE.crc32(data, seed) == zlib.crc32(data, seed)


def _encode(path: Path, drafts: list[MessageDraft], fill: int, compiled: bool) -> object:
    """What ``_encode`` gives after ``fill`` bytes of messages, as values (or the error's text)."""
    saved = store.encode_run
    store.encode_run = saved if compiled else None
    try:
        with CommitLog.open(str(path), SEGMENT, clock=lambda: TS) as log:
            log._id_prefix = "0123456789ABCDEF"
            if fill:
                log.append(MessageDraft("t", bytes(fill)))
            try:
                runs, results = log._encode(drafts, TS)
            except InvalidDraft as exc:
                return ("InvalidDraft", str(exc), exc.__notes__ if hasattr(exc, "__notes__") else None)
            except Exception as exc:  # the same non-draft error on both paths (e.g. a lone surrogate)
                return (type(exc).__name__, str(exc))
            return [(start, b"".join(parts)) for start, parts in runs], results, log._next_id
    finally:
        store.encode_run = saved


@SETTINGS
@given(drafts=st.lists(any_drafts, max_size=12), fill=st.integers(0, 3900))
def test_encode_is_the_same_with_and_without_the_compiled_path(
    tmp_path_factory: pytest.TempPathFactory, drafts: list[MessageDraft], fill: int
) -> None:
    root = tmp_path_factory.mktemp("enc")
    assert _encode(root / "c", drafts, fill, True) == _encode(root / "p", drafts, fill, False)


def _log_bytes(root: Path, drafts: list[MessageDraft]) -> bytes:
    with CommitLog.open(str(root), SEGMENT, clock=lambda: TS) as log:
        log.append_batch(drafts)
    return (root / "00000000000000000000").read_bytes()


def _scan(buf: bytes, compiled: bool, **kwargs: object) -> tuple[object, ...]:
    saved = scanning._skip_messages
    scanning._skip_messages = saved if compiled else None
    try:
        result: Scan = scan_units(buf, **kwargs)  # type: ignore[arg-type]
    finally:
        scanning._skip_messages = saved
    error = result.error
    return (*result[:4], None if error is None else (error.reason, error.offset, str(error)))


@st.composite
def scan_cases(draw: st.DrawFn, tmp_root: Path) -> tuple[bytes, dict[str, object]]:
    """A small log (valid, or with a byte flipped, or cut) and scan_units arguments over it."""
    drafts = draw(
        st.lists(
            st.builds(MessageDraft, st.just("topic"), st.binary(max_size=700), keys=text),
            min_size=1,
            max_size=12,
        )
    )
    data = bytearray(_log_bytes(tmp_root / str(draw(st.uuids())), drafts))
    flip = draw(st.one_of(st.none(), st.integers(0, SEGMENT - 1)))
    if flip is not None:
        data[flip] ^= draw(st.integers(1, 255))
    cut = draw(st.integers(0, SEGMENT))
    buf = bytes(data[:cut]) if cut < 20 or cut % 3 else bytes(data)
    end = min(cut, len(buf))
    start = draw(st.integers(0, 200))
    base_shift = draw(st.sampled_from([0, 0, 1, -1]))
    return buf, {
        "start": 0 if start % 4 else min(start, end),  # mostly from a unit start, sometimes inside one
        "end": end,
        "base_offset": base_shift,
        "segment_end": SEGMENT + base_shift,
        "verify_crc": draw(st.booleans()),
        "strict": draw(st.booleans()),
        "max_messages": draw(st.integers(-1, 6)),
        "window": draw(st.booleans()),
    }


@pytest.fixture(scope="module")
def tmp_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("scan")


@SETTINGS
@given(case=st.data())
def test_scan_is_the_same_with_and_without_the_compiled_path(tmp_root: Path, case: st.DataObject) -> None:
    buf, kwargs = case.draw(scan_cases(tmp_root))
    assert _scan(buf, True, **kwargs) == _scan(buf, False, **kwargs)


@SETTINGS
@given(case=st.data())
def test_the_message_walk_answers_scan_units_end_when_it_answers(tmp_root: Path, case: st.DataObject) -> None:
    buf, kwargs = case.draw(scan_cases(tmp_root))
    start, end = kwargs.pop("start"), kwargs.pop("end")
    del kwargs["max_messages"], kwargs["window"]
    quick = message_walk(buf, **kwargs)(start, end)  # type: ignore[arg-type]
    assert quick == -1 or quick > start  # type: ignore[operator]
    if quick != -1:
        for window in (False, True):
            assert quick == _scan(buf, False, start=start, end=end, **kwargs, window=window)[0]


def test_the_message_walk_answers_for_plain_batches_and_leaves_blank_markers_to_scan_units(
    tmp_path: Path,
) -> None:
    buf = _log_bytes(tmp_path, [MessageDraft("topic", b"x" * 900)] * 5)  # 4 fit, then a blank marker
    walk = message_walk(buf, 0, SEGMENT)
    first = scan_units(buf, 0, 2000, 0, SEGMENT, window=True)
    assert walk(0, 2000) == first.end > 0  # cut by the window
    whole = scan_units(buf, 0, SEGMENT, 0, SEGMENT)
    assert whole.stop is ScanStop.BLANK
    assert walk(0, SEGMENT) == -1  # scan_units takes the blank marker
    assert walk(whole.last_message + 1, SEGMENT) == -1  # no message there
