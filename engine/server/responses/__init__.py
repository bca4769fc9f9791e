"""POST /v1/responses (OpenAI's Responses API) run as a chat request: its body, input items, events, store."""
