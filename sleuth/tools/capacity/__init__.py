"""capacity_plan: fit, KV cache and context from the checkpoint, the GPUs and the engine rules."""
