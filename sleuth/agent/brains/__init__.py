"""Brains backed by a language model, one module per provider.

`select.select_brain` picks one from the flags, sleuth.toml and the environment;
`anthropic.AnthropicBrain` speaks the Messages API, `openai.OpenAIBrain` any
OpenAI-compatible chat endpoint (its wire format in `chat`, its context fitting in
`fitting`). Both go through the one retry layer in `retry`, and `prompt` holds the
system prompt every brain is given. Each module is imported by name; nothing is
re-exported here.
"""
