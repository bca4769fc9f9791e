"""A chat request's prompt: its messages through the chat template (with the template and kwargs vLLM admits),
prompt_embeds parts spliced in, or the prompt token ids a router forwards in its place."""

from __future__ import annotations

from kvtool.engine.runtime.prompt_embeds import EmbedsPrompt
from kvtool.engine.server.chat.embeds import ChatEmbeds
from kvtool.engine.server.chat.protocol import ChatCompletionRequest, ChatMessage
from kvtool.engine.server.errors import APIError
from kvtool.engine.sizing import messages

TEMPLATE_KWARGS_NOT_ALLOWED = frozenset({"chat_template", "tokenize"})  # set by the server, never by a request
FORWARDED_IDS = "kv_transfer_params.prompt_token_ids"


def chat_prompt_ids(processor, chat: list[ChatMessage], add_generation_prompt: bool = True, **kwargs) -> list[int]:
    return processor.chat_prompt_ids([m.as_template_message() for m in chat], add_generation_prompt, **kwargs)


def template_kwargs(body: ChatCompletionRequest, tools: list[dict], trusted: bool) -> dict:
    """What vLLM passes to the chat template besides the messages (chat_template_kwargs win)."""
    requested = requested_template(body.chat_template, body.chat_template_kwargs, trusted)
    if body.continue_final_message and body.add_generation_prompt:
        raise APIError(messages.CONTINUE_AND_GENERATION_PROMPT, param="continue_final_message")
    kwargs = {
        "tools": tools or None,
        "documents": body.documents,
        "continue_final_message": body.continue_final_message,
    }
    return {**kwargs, **requested}


def requested_template(chat_template: str | None, chat_template_kwargs: dict | None, trusted: bool) -> dict:
    """A request's own template and template kwargs, as vLLM admits them: a template only with
    --trust-request-chat-template, and never `chat_template` or `tokenize` among the kwargs."""
    kwargs = chat_template_kwargs or {}
    if not trusted and (chat_template is not None or kwargs.get("chat_template") is not None):
        raise APIError(messages.UNTRUSTED_CHAT_TEMPLATE)
    unexpected = TEMPLATE_KWARGS_NOT_ALLOWED & kwargs.keys()
    if unexpected:
        raise APIError(messages.UNEXPECTED_TEMPLATE_KWARGS.format(names=unexpected))
    return {**kwargs, **({"chat_template": chat_template} if chat_template is not None else {})}


def forwarded_prompt_ids(body: ChatCompletionRequest, chat: list[ChatMessage], vocab_size: int) -> list[int] | None:
    """Decode-side token reuse (vLLM's disaggregated serving): the prompt token ids a router forwards in
    kv_transfer_params replace the rendered messages, unless `echo` or non-text content needs the messages."""
    ids = (body.kv_transfer_params or {}).pop("prompt_token_ids", None)
    if ids is None or body.echo or any(m.has_non_text_content() for m in chat):
        return None
    if not isinstance(ids, list) or not ids or any(type(i) is not int or i < 0 for i in ids):
        raise APIError(messages.with_parameter(messages.FORWARDED_IDS_INVALID, FORWARDED_IDS), param=FORWARDED_IDS)
    if max(ids) >= vocab_size:
        message = messages.TOKEN_OUT_OF_VOCAB.format(token_id=max(ids))
        raise APIError(messages.with_parameter(message, FORWARDED_IDS), param=FORWARDED_IDS)
    return ids


def render_prompt(processor, body: ChatCompletionRequest, chat: list[ChatMessage], kwargs: dict) -> str | EmbedsPrompt:
    """The conversation rendered by the chat template; with prompt_embeds parts, their rows spliced in."""
    embeds = ChatEmbeds(processor)
    text = processor.render_chat(embeds.template_messages(chat), body.add_generation_prompt, **kwargs)
    return embeds.prompt(text, body.add_special_tokens)


def echo_text(body: ChatCompletionRequest, chat: list[ChatMessage]) -> str:
    """vLLM's chat echo: the conversation's last message, when it is the assistant's own."""
    last = chat[-1]
    return (last.text() or "") if body.echo and last.role == "assistant" else ""
