"""Log lines as an operator reads them (text) or a log pipeline parses them (JSON)."""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator

import pytest

from simdra._driver.observability.logs import configure_logging, log_context

UID = "0d7c5a3e-1111-4111-8111-111111111111"


@pytest.fixture
def output() -> Iterator[io.StringIO]:
    """The root logger's handlers and levels are restored after each test."""
    root, own = logging.getLogger(), logging.getLogger("simdra")
    saved = (list(root.handlers), root.level, own.level)
    stream = io.StringIO()
    yield stream
    for handler in root.handlers[:]:
        if handler not in saved[0]:
            root.removeHandler(handler)
            handler.close()
    root.setLevel(saved[1])
    own.setLevel(saved[2])


def json_lines(stream: io.StringIO) -> list[dict[str, str]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_carry_message_level_and_claim_context(output):
    configure_logging("json", 0, stream=output)
    log = logging.getLogger("simdra._driver.claims.prepare")
    with log_context(claim="default/web", claim_uid=UID):
        log.info("prepared %s", "web")
    log.info("outside")

    inside, outside = json_lines(output)
    assert inside["msg"] == "prepared web"
    assert (inside["level"], inside["logger"]) == ("INFO", "simdra._driver.claims.prepare")
    assert (inside["claim"], inside["claim_uid"]) == ("default/web", UID)
    assert inside["ts"].endswith("Z") and "T" in inside["ts"]
    assert "claim_uid" not in outside


def test_json_keeps_exceptions_and_extra_fields(output):
    configure_logging("json", 0, stream=output)
    log = logging.getLogger("simdra._driver.slices.publisher")
    try:
        raise OSError("connection reset")
    except OSError:
        log.exception("write failed", extra={"pool": "node-a", "level": "gold"})

    (line,) = json_lines(output)
    assert line["msg"] == "write failed"
    assert line["pool"] == "node-a"
    assert (line["level"], line["ctx_level"]) == ("ERROR", "gold")  # reserved keys win
    assert "OSError: connection reset" in line["exc"]


def test_text_appends_key_value_pairs_quoting_spaces(output):
    configure_logging("text", 0, stream=output)
    with log_context(claim_uid=UID, device="gpu-0", pool=None):
        logging.getLogger("simdra._driver.claims").warning("step %s failed", "write CDI spec",
                                                   extra={"error": "no space left"})

    line = output.getvalue().strip()
    assert " WARNING simdra._driver.claims: step write CDI spec failed " in line
    assert f"claim_uid={UID}" in line
    assert "device=gpu-0" in line
    assert 'error="no space left"' in line
    assert "pool=" not in line  # None means unknown: left out


def test_nested_contexts_add_and_override_then_restore(output):
    configure_logging("json", 0, stream=output)
    log = logging.getLogger("simdra._driver.claims")
    with log_context(claim_uid=UID, pool="node-a"):
        with log_context(device="nic-0", pool="node-a-nics"):
            log.info("inner")
        log.info("outer")

    inner, outer = json_lines(output)
    assert (inner["claim_uid"], inner["pool"], inner["device"]) == (UID, "node-a-nics", "nic-0")
    assert (outer["claim_uid"], outer["pool"]) == (UID, "node-a")
    assert "device" not in outer


def test_threads_see_only_their_own_context(output):
    configure_logging("json", 0, stream=output)
    log = logging.getLogger("simdra._driver.claims")
    both_inside = threading.Barrier(2, timeout=5)

    def work(uid: str) -> None:
        with log_context(claim_uid=uid):
            both_inside.wait()  # both contexts are open at the same time
            log.info("working on %s", uid)
            both_inside.wait()

    threads = [threading.Thread(target=work, args=(f"uid-{n}",)) for n in range(2)]
    for thread in threads:
        thread.start()
    log.info("main thread")
    for thread in threads:
        thread.join()

    lines = json_lines(output)
    for line in lines:
        if line["msg"].startswith("working on "):
            assert line["claim_uid"] == line["msg"].removeprefix("working on ")
        else:
            assert "claim_uid" not in line
    assert len(lines) == 3


def test_verbosity_selects_debug_for_simdra_then_libraries(output):
    def emitted(verbosity: int) -> list[str]:
        output.seek(0)
        output.truncate()
        configure_logging("text", verbosity, stream=output)
        logging.getLogger("simdra._driver.kubelet").debug("own debug")
        logging.getLogger("urllib3.connectionpool").debug("library debug")
        logging.getLogger("urllib3.connectionpool").info("library info")
        return [line.split(": ", 1)[1] for line in output.getvalue().splitlines()]

    assert emitted(0) == ["library info"]
    assert emitted(1) == ["own debug", "library info"]
    assert emitted(4) == ["own debug", "library debug", "library info"]


def test_reconfiguring_replaces_the_handler_and_bad_values_are_refused(output):
    configure_logging("text", 0, stream=output)
    configure_logging("json", 0, stream=output)
    logging.getLogger("simdra").info("once")
    assert [line["msg"] for line in json_lines(output)] == ["once"]
    with pytest.raises(ValueError, match="xml"):
        configure_logging("xml", 0, stream=output)
    with pytest.raises(ValueError, match="verbosity"):
        configure_logging("text", -1, stream=output)


def test_text_lines_cannot_be_forged_by_values_from_the_api(output):
    configure_logging("text", 0, stream=output)
    forged = "web\n2026-01-01T00:00:00.000Z ERROR simdra._driver.claims: forged"
    log = logging.getLogger("simdra._driver.claims.prepare")
    with log_context(claim=f"default/{forged}", claim_uid="u\r\x1b[2J"):
        log.warning("prepare of %s failed", forged)
        try:
            raise ValueError(f"bad name {forged}")
        except ValueError:
            log.exception("step failed")

    lines = output.getvalue().splitlines()
    starts = [line for line in lines if not line.startswith(" ")]
    assert len(starts) == 2  # one line per record; traceback lines are indented
    assert "web\\n2026-01-01T00:00:00.000Z ERROR" in starts[0]
    assert 'claim_uid="u\\r\\u001b[2J"' in starts[0] and "\x1b" not in output.getvalue()
    assert "    ValueError: bad name web" in lines  # the traceback is kept, indented
