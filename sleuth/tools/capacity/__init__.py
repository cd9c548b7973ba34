"""capacity_plan: fit, KV cache and context from the checkpoint, the GPUs and the engine rules.

capacity_plan.py is the tool; plan.py its input and output; sizing.py the arithmetic;
checks.py the reasons and the verdict; render.py the text. What it reads: model.py
(config.json), weights.py (the weight map), gpus.py (the GPU table), rules.py and
quant_rules.py (the engines' rules, cited), source.py (the installed engine's own lines).
"""
