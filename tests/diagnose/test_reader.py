"""The streaming reader: only the stretches around an anchor, cleaned of colours and line-end noise,
then normalised into logical lines."""

import codecs
import io
import random

from kvtool.engine.diagnosis import reader, widening
from kvtool.engine.diagnosis.reader import candidate_lines, clean, read_chunks, stretches


def random_chunks(seed: int, words: tuple[bytes, ...], repeats: int, final_breaks: tuple[int, ...]):
    """300 chunks of up to 300 lines, anchor words among filler lines at a random density each."""
    rng = random.Random(seed)
    for _ in range(300):
        density = rng.random()
        lines = [
            rng.choice(words)
            if rng.random() < density
            else b"line %d" % rng.randrange(10**6) * rng.randrange(1, repeats)
            for _ in range(rng.randrange(1, 300))
        ]
        yield b"\n".join(lines) + b"\n" * rng.choice(final_breaks)


def test_the_cheap_every_line_check_never_keeps_a_chunk_the_merge_would_cut():
    from kvtool.engine.diagnosis.anchors import ANCHORS

    words = (b"out of memory", b"max model len", b"POST /v1/", b"Added request", b"", b"an ordinary line")
    for chunk in random_chunks(11, words, repeats=60, final_breaks=(0, 1)):
        spans, windows = set(), 0
        for anchor, refinements in ANCHORS.items():
            windows = reader._add_hits(spans, chunk, anchor, refinements, windows)
            if spans and widening.keeps_every_line(spans, chunk):
                assert widening.merged(sorted(spans), chunk) == [(0, len(chunk))]


def lines_of(data: bytes, anchors=None) -> list[str]:
    anchors = anchors or {b"KV": ()}
    return [text for text, _ in candidate_lines(io.BytesIO(data), anchors)]


def test_only_the_neighbourhood_of_an_anchor_is_decoded():
    far = b"".join(b"boring line %d\n" % i for i in range(100))
    found = stretches(io.BytesIO(far + b"the KV line\n" + far), {b"KV": ()})
    decoded = [line for lines in found for line in lines if line]
    assert "the KV line" in decoded
    assert len(decoded) == 2 * widening.NEIGHBOURS + 1
    assert decoded[0] == f"boring line {100 - widening.NEIGHBOURS}"


def test_stretches_come_back_in_order_and_are_not_joined_across_a_gap():
    filler = b"".join(b"x%d\n" % i for i in range(60))
    data = b"first KV line that is long enough to be wrapped\n" + filler + b"second KV line\n"
    texts = lines_of(data)
    assert texts.index("second KV line") > 0
    assert not any("first KV" in text and "second KV" in text for text in texts)


def test_ansi_crlf_and_worker_prefixes_are_removed():
    raw = b"\x1b[1;36m(VllmWorker rank=0 pid=123)\x1b[0;0m ERROR KV broke\r\n(EngineCore_0 pid=77) INFO KV ok\r\n"
    assert lines_of(raw) == ["ERROR KV broke", "INFO KV ok"]


def test_carriage_returns_inside_a_line_split_progress_bars():
    assert clean(b"10%|#   \r 50%|##### KV\r100%") == ["10%|#", " 50%|##### KV", "100%"]


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
    data = b"params: SamplingParams(max_tokens=256)\n" * 30 + b"\n" * 30 + b"max_model_len=4096\n"
    assert lines_of(data, {b"max": (b"max_model_len",)}) == ["max_model_len=4096"]


def test_a_refinement_matches_across_a_wrapped_line():
    data = b"GPU KV cache\nusage: 99.1%\n"
    assert reader.line_spans(data, {b"cache": (b"cache usage: 9",)})


def test_utf16_with_a_byte_order_mark_is_read_as_text():
    text = "INFO start\r\nERROR KV broke \u00e9\r\n"
    assert "ERROR KV broke \u00e9" in lines_of(text.encode("utf-16"))
    assert "ERROR KV broke \u00e9" in lines_of(codecs.BOM_UTF16_BE + text.encode("utf-16-be"))


def test_stopping_once_every_line_is_kept_gives_the_stretches_every_anchor_gives():
    from kvtool.engine.diagnosis.anchors import ANCHORS

    words = (b"out of memory", b"max model len", b"POST /v1/", b"Added request", b"preempted", b"an ordinary line")
    for chunk in random_chunks(7, words, repeats=9, final_breaks=(1,)):
        spans, windows = set(), 0
        for anchor, refinements in ANCHORS.items():
            windows = reader._add_hits(spans, chunk, anchor, refinements, windows)
        assert reader.line_spans(chunk, ANCHORS) == widening.merged(sorted(spans), chunk)


def test_a_sign_of_serving_before_a_hit_does_not_stop_the_hits_widening():
    chunk = b"the end of a wrapped message\nPOST /v1/chat/completions 200\nanother line\nthe KV line\n"
    spans, windows = set(), 0
    for anchor, refinements in {b"POST /v1/": None, b"KV": ()}.items():
        windows = reader._add_hits(spans, chunk, anchor, refinements, windows)
    assert widening.merged(sorted(spans), chunk) == [(0, len(chunk))]
    assert widening.keeps_every_line(spans, chunk)


def test_what_people_write_is_looked_for_in_the_first_chunk_only():
    prose = b"the answers are truncated, max_tokens is not set\n\n"
    filler = b"".join(b"an ordinary line %d\n" % i for i in range(120_000))  # more than one chunk
    anchors, first = {b"KV": ()}, {b"runcat": ()}
    found = [text for text, _ in candidate_lines(io.BytesIO(filler + prose), anchors, first)]
    assert prose.decode().strip() not in found
    found = [text for text, _ in candidate_lines(io.BytesIO(prose + filler), anchors, first)]
    assert prose.decode().strip() in found
