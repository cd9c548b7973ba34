"""Transcripts: the event schema, the append-only store, redaction, verify and render."""
