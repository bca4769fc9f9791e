"""The tool-call formats tool_choice "auto" reads: hermes <tool_call> JSON and llama3_json."""

import json

from kvtool.engine.server.chat.tool_parsers import TOOL_PARSERS, HermesToolParser, Llama3JsonToolParser
from kvtool.engine.server.defaults import DEFAULT_TOOL_CALL_PARSER, TOOL_CALL_PARSERS


def test_every_tool_call_parser_serve_offers_has_a_parser():
    assert set(TOOL_PARSERS) == set(TOOL_CALL_PARSERS) and DEFAULT_TOOL_CALL_PARSER in TOOL_PARSERS


def test_hermes_reads_every_call_and_the_content_before_them():
    text = (
        'Let me check.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
        '<tool_call>{"name": "get_time", "arguments": {"city": "Oslo"}}</tool_call>'
    )
    extracted = HermesToolParser().extract(text)
    assert extracted.content == "Let me check."
    assert [(c.name, json.loads(c.arguments)) for c in extracted.tool_calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_time", {"city": "Oslo"}),
    ]


def test_hermes_reads_an_unclosed_last_call_and_leaves_plain_text_alone():
    assert HermesToolParser().extract('<tool_call>{"name": "f", "arguments": {}}').tool_calls[0].name == "f"
    plain = HermesToolParser().extract("No tools needed.")
    assert plain.content == "No tools needed." and plain.tool_calls == []
    broken = HermesToolParser().extract("<tool_call>{not json")
    assert broken.tool_calls == [] and broken.content == "<tool_call>{not json"


def test_hermes_holds_back_what_may_become_a_tag_while_streaming():
    parser = HermesToolParser()
    assert parser.sendable_content("Sure <tool_") == len("Sure ")
    assert parser.sendable_content("Sure <tool_call>{") == len("Sure ")
    assert parser.sendable_content("Sure thing") == len("Sure thing")


def test_llama3_json_reads_one_or_several_calls():
    one = Llama3JsonToolParser().extract('<|python_tag|>{"name": "f", "parameters": {"x": 1}}')
    assert [(c.name, json.loads(c.arguments)) for c in one.tool_calls] == [("f", {"x": 1})] and one.content is None
    two = Llama3JsonToolParser().extract('{"name": "f", "parameters": {}}; {"name": "g", "parameters": {"y": 2}}')
    assert [c.name for c in two.tool_calls] == ["f", "g"]
    assert Llama3JsonToolParser().extract("Hello there").content == "Hello there"


def test_a_forced_call_cut_short_by_max_tokens_is_dropped():
    from kvtool.engine.server.chat.tools import ToolPlan

    required = ToolPlan("required", [])
    whole = required.extract('[{"name": "f", "parameters": {"a": 1}}]')
    assert [(c.name, json.loads(c.arguments)) for c in whole.tool_calls] == [("f", {"a": 1})]
    cut = required.extract('[{"name": "f", "param', "length")
    assert cut.tool_calls == [] and cut.content == ""
    named = ToolPlan("named", [], "f")
    assert named.extract('{"a": 1}', "stop").tool_calls[0].arguments == '{"a": 1}'
    assert named.extract('{"a": ', "length").tool_calls == [] and named.extract("  ", "stop").tool_calls == []


def test_a_streamed_reply_sends_content_as_it_comes_and_each_call_whole_at_the_end():
    from kvtool.engine.server.chat.tool_stream import ToolCallStream
    from kvtool.engine.server.chat.tools import ToolPlan

    stream = ToolCallStream(ToolPlan("auto", [], parser=HermesToolParser()), parallel_tool_calls=True)
    pieces = ["Let me ", "check.<tool", '_call>{"name": "f", ', '"arguments": {"x": 1}}</tool_call>']
    deltas = [stream.deltas(piece, None) for piece in pieces] + [stream.deltas("", "stop")]
    assert deltas[:3] == [[{"content": "Let me "}], [{"content": "check."}], []]
    call = deltas[-1][0]["tool_calls"][0]
    assert call["index"] == 0 and call["function"] == {"name": "f", "arguments": '{"x": 1}'}


def test_a_streamed_named_call_cut_by_max_tokens_ends_without_a_call():
    from kvtool.engine.server.chat.tool_stream import ToolCallStream
    from kvtool.engine.server.chat.tools import ToolPlan, finish_reason

    stream = ToolCallStream(ToolPlan("named", [], "f"), parallel_tool_calls=True)
    first = stream.deltas('{"a": ', None)
    assert first[0]["tool_calls"][0]["function"] == {"name": "f", "arguments": '{"a": '}  # sent as it comes
    stream.deltas('"b', "length")
    assert stream.extracted.tool_calls == [] and finish_reason(stream.plan, stream.extracted, "length") == "length"
