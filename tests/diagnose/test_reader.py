"""The streaming reader: only anchored lines, cleaned of colours, worker prefixes and line-end noise."""

import codecs
import io

from kvtool.engine.diagnosis import reader
from kvtool.engine.diagnosis.reader import candidate_lines, clean, read_chunks


def lines_of(data: bytes, anchors=None) -> list[str]:
    anchors = anchors or {b"KV": ()}
    return list(candidate_lines(io.BytesIO(data), anchors))


def test_only_lines_with_an_anchor_come_back_in_order():
    data = b"INFO boring\nfirst KV line\nnothing\nsecond KV line\n"
    assert lines_of(data) == ["first KV line", "second KV line"]


def test_ansi_crlf_and_worker_prefixes_are_removed():
    raw = b"\x1b[1;36m(VllmWorker rank=0 pid=123)\x1b[0;0m ERROR KV broke\r\n(EngineCore_0 pid=77) INFO KV ok\r\n"
    assert lines_of(raw) == ["ERROR KV broke", "INFO KV ok"]
    assert clean(b"(RayWorkerWrapper pid=5, ip=10.0.0.2) KV x") == ("KV x",)


def test_carriage_returns_inside_a_line_split_progress_bars():
    assert clean(b"10%|#   \r 50%|##### KV\r100%") == ("10%|#", "50%|##### KV", "100%")


def test_invalid_utf8_is_replaced_not_fatal():
    assert lines_of(b"\xc3\x28 KV \xff\xfe here\n") == ["\ufffd( KV \ufffd\ufffd here"]


def test_a_line_longer_than_the_window_is_cut_around_each_hit():
    filler = b"x" * (reader.LONG_LINE * 4)
    data = filler + b" KV first " + filler + b" KV second " + filler
    pieces = lines_of(data)
    assert len(pieces) == 2
    assert all(len(piece) <= 2 * reader.WINDOW + 16 for piece in pieces)
    assert "KV first" in pieces[0] and "KV second" in pieces[1]


def test_chunks_end_on_line_boundaries(monkeypatch):
    monkeypatch.setattr(reader, "CHUNK_BYTES", 64)
    data = b"".join(b"line %03d KV\n" % i for i in range(100))
    chunks = list(read_chunks(io.BytesIO(data)))
    assert b"".join(chunks) == data
    assert all(chunk.endswith(b"\n") for chunk in chunks)
    assert len(lines_of(data)) == 100


def test_a_line_with_no_end_is_passed_on_in_pieces(monkeypatch):
    monkeypatch.setattr(reader, "CHUNK_BYTES", 64)
    data = b"y" * 1000
    chunks = list(read_chunks(io.BytesIO(data)))
    assert b"".join(chunks) == data and max(map(len, chunks)) <= 128


def test_refinements_drop_lines_that_hold_only_the_anchor():
    data = b"params: SamplingParams(max_tokens=256)\nmax_model_len=4096\n"
    assert lines_of(data, {b"max": (b"max_model_len",)}) == ["max_model_len=4096"]


def test_utf16_with_a_byte_order_mark_is_read_as_text():
    text = "INFO start\r\nERROR KV broke \u00e9\r\n"
    assert lines_of(text.encode("utf-16")) == ["ERROR KV broke \u00e9"]
    assert lines_of(codecs.BOM_UTF16_BE + text.encode("utf-16-be")) == ["ERROR KV broke \u00e9"]
