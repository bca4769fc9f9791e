"""Server answers that are neither memory nor length problems but land in the same pastes."""

from kvtool.engine.diagnosis.patterns import Pattern, compile_

PATTERNS = [
    Pattern(
        "missing_chat_template",
        "request",
        "template",
        compile_(
            r"default chat template is no longer allowed|tokenizer\.chat_template is not set"
            r"|must provide a chat template|Cannot use chat template functions"
        ),
    ),
    Pattern(
        "tool_choice_auto_without_flags",
        "request",
        "tool choice requires",
        compile_(r"\\?\"auto\\?\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set"),
    ),
    Pattern(
        "model_not_found",
        "request",
        "The model `",
        compile_(r"The model `(?P<requested_model>[^`]{1,300})` does not exist"),
        detail="requested_model",
    ),
]
