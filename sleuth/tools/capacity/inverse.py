"""The inverse questions, answered by the same accounting as a plan.

"The smallest number of GPUs of this type for C concurrent requests of L tokens": every tp the
model's heads allow (1, 2, 4, ... up to 64), each as many data-parallel replicas as C needs,
the fewest GPUs in all. "The longest context at concurrency C on these GPUs": the largest L
whose predicted concurrency still reaches C, searched by halving between 1 and the model's
maximum. Nothing is launched: each candidate is one pass of sizing.size.
"""

from __future__ import annotations

from sleuth.tools.capacity.gpus import GpuSpec
from sleuth.tools.capacity.inverse_answer import Candidate, InverseAnswer
from sleuth.tools.capacity.model import ModelShape
from sleuth.tools.capacity.plan import CapacityInput
from sleuth.tools.capacity.sizing import size
from sleuth.tools.checkpoints.models import CheckpointSummary
from sleuth.tools.results import ToolError

MAX_TP = 64


def smallest_gpus(
    args: CapacityInput,
    shape: ModelShape,
    summary: CheckpointSummary,
    gpu: GpuSpec,
    installed: str | None,
) -> tuple[CapacityInput, InverseAnswer]:
    """The fewest GPUs of `gpu`'s type (tp x data-parallel replicas) for `concurrency`
    requests of `context_length` tokens, and the input that plans that layout."""
    want = _concurrency(args)
    question = (
        f"smallest number of {gpu.smi_name} for {want} concurrent requests of "
        f"{args.context_length or 'the model maximum'} tokens"
    )
    found: list[Candidate] = []
    tp = 1
    while tp <= MAX_TP:
        if shape.attention_heads % tp == 0:
            trial = args.model_copy(update={"tp": tp, "dp": 1})
            sized = size(trial, shape, summary, gpu, installed)
            per = sized.account.max_concurrency
            weights_fit = sized.share.bytes_per_gpu < sized.account.budget_bytes
            if per >= 1 and weights_fit:
                replicas = -(-want // int(per))
                found.append(Candidate(tp=tp, replicas=replicas, gpus=tp * replicas,
                                       concurrency_per_replica=round(per, 2),
                                       kv_tokens=sized.max_tokens))  # fmt: skip
        tp *= 2
    if not found:
        return args, InverseAnswer(
            question=question,
            answer=f"no tp up to {MAX_TP} holds one request of that length on {gpu.smi_name}",
        )
    best = min(found, key=lambda c: (c.gpus, c.tp))
    chosen = args.model_copy(update={"tp": best.tp, "dp": best.replicas})
    answer = (
        f"{best.gpus}× {gpu.smi_name}: tp {best.tp} × {best.replicas} replica(s), each "
        f"holding {best.concurrency_per_replica} requests of that length"
    )
    return chosen, InverseAnswer(
        question=question,
        answer=answer,
        gpus=best.gpus,
        tp=best.tp,
        replicas=best.replicas,
        candidates=found,
    )


def longest_context(
    args: CapacityInput,
    shape: ModelShape,
    summary: CheckpointSummary,
    gpu: GpuSpec,
    installed: str | None,
    model_max: int,
) -> tuple[CapacityInput, InverseAnswer]:
    """The longest context at which `concurrency` requests still fit, and its input."""
    want = _concurrency(args)
    question = f"longest context for {want} concurrent requests at tp {args.tp}"

    def holds(length: int) -> bool:
        trial = args.model_copy(update={"context_length": length})
        return size(trial, shape, summary, gpu, installed).account.max_concurrency >= want

    if not holds(1):
        return args, InverseAnswer(question=question, answer="not even 1-token requests fit")
    low, high = 1, model_max
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if holds(mid) else (low, mid - 1)
    capped = " (the model's own maximum)" if low == model_max else ""
    return args.model_copy(update={"context_length": low}), InverseAnswer(
        question=question,
        answer=f"{low:,} tokens{capped} for {want} concurrent requests",
        context=low,
    )


def _concurrency(args: CapacityInput) -> int:
    if not args.concurrency:
        raise ToolError(f"find={args.find} needs concurrency (the requests served at once)")
    return args.concurrency
