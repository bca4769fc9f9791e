"""POST /v1/chat/completions and its batch route: the request bodies, the prompt through the chat template, tools."""
