"""Chat content parts of type `prompt_embeds`, spliced into the prompt as vLLM 0.33 does (vllm/renderers/hf.py).

Each part goes through the chat template as a marker; the rendered text is split at the markers, each piece
tokenized on its own (as the text around vLLM's placeholder special token is), and each marker becomes its rows,
one position per row. A marker the template leaves out drops its rows; one it writes twice is a 400. With
--enable-prompt-embeds, text may not hold vLLM's placeholder, as in vLLM.
"""

from __future__ import annotations

import re

from kvtool.engine.runtime.prompt_embeds import PLACEHOLDER_TOKEN_ID, EmbedsPrompt, EmbedsSpan
from kvtool.engine.server.body_checks import PROMPT_EMBEDS_PLACEHOLDER, refuse
from kvtool.engine.server.chat.protocol import ChatMessage, ContentPart
from kvtool.engine.server.errors import APIError
from kvtool.engine.sizing import messages as msg


def marker(index: int) -> str:
    return f"{PROMPT_EMBEDS_PLACEHOLDER}__vllm_prompt_embed_{index}__"


class ChatEmbeds:
    """One conversation's embeddings parts: loaded as its messages are written for the template, then spliced."""

    def __init__(self, processor):
        self.processor = processor
        self.rows: list = []  # one tensor per prompt_embeds part, in the order of the parts

    def template_messages(self, chat: list[ChatMessage]) -> list[dict]:
        for message in chat:
            if isinstance(message.content, str):
                self._check_text(message.content)
        return [message.as_template_message(self._part_text) for message in chat]

    def prompt(self, text: str, add_special_tokens: bool) -> str | EmbedsPrompt:
        """The rendered conversation, with the rows of the markers it holds in their place."""
        shown = sorted((text.index(marker(i)), i) for i in range(len(self.rows)) if self._shown(text, i))
        if not shown:
            return text
        pieces = re.split("(" + "|".join(re.escape(marker(i)) for _, i in shown) + ")", text)
        by_marker = {marker(i): self.rows[i] for _, i in shown}
        ids, spans = [], []
        for piece in pieces:
            if piece in by_marker:
                spans.append(EmbedsSpan(len(ids), by_marker[piece]))
                ids += [PLACEHOLDER_TOKEN_ID] * len(by_marker[piece])
            elif piece:
                ids += self.processor.encode(piece, "messages", add_special_tokens=add_special_tokens and not ids)
        return EmbedsPrompt(ids, tuple(spans))

    def _part_text(self, part: ContentPart) -> str | None:
        if part.type == "prompt_embeds":
            self.rows.append(self.processor.load_prompt_embeds(part.data))
            return marker(len(self.rows) - 1)
        text = part.as_text()
        self._check_text(text)
        return text

    def _check_text(self, text: str | None) -> None:
        if text and self.processor.embeds_shape is not None and PROMPT_EMBEDS_PLACEHOLDER in text:
            refuse(msg.PROMPT_EMBEDS_PLACEHOLDER_IN_TEXT.format(token=PROMPT_EMBEDS_PLACEHOLDER), "messages")

    def _shown(self, text: str, index: int) -> bool:
        count = text.count(marker(index))
        if count > 1:
            raise APIError(msg.PROMPT_EMBEDS_PLACEHOLDER_REPEATED.format(marker=marker(index), count=count))
        return count == 1
