"""What capacity_plan answers to an inverse question (find=min_gpus or max_context)."""

from __future__ import annotations

from pydantic import BaseModel


class Candidate(BaseModel):
    tp: int
    replicas: int
    gpus: int
    concurrency_per_replica: float
    kv_tokens: int


class InverseAnswer(BaseModel):
    question: str
    answer: str
    """One sentence: the GPUs (or context) found, or why none is."""
    gpus: int | None = None
    tp: int | None = None
    replicas: int | None = None
    context: int | None = None
    candidates: list[Candidate] = []
