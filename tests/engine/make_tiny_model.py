"""Write a tiny random-weight model that vLLM can serve: `python make_tiny_model.py OUT [SHAPE]`.

SHAPE is one of SHAPES (default `gqa`, the Llama the serving tests use); the others give the
KV cache tests other attention layouts: `mha` (as many KV heads as query heads), `swa` (Gemma 2's
sliding-window layers alternating with full ones) and `mla` (DeepSeek-V2's latent attention).

Runs with the engine environment's interpreter (it has torch, transformers and tokenizers),
never Sleuth's. The tokenizer is a byte-level BPE trained here, offline, on a fixed text, so
every byte sequence encodes and nothing is downloaded. Seeded: the same folder every time.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    DeepseekV2Config,
    DeepseekV2ForCausalLM,
    Gemma2Config,
    Gemma2ForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
)

SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>"]
# A Llama-3-like template, short enough to read in a test failure.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}"
    "<|end_header_id|>\n\n{{ m['content'] }}<|end_of_text|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
CORPUS = [
    "The quick brown fox jumps over the lazy dog. " * 4,
    "Sleuth investigates LLM serving deployments: checkpoints, engines, benchmarks.",
    "def serve(model, port): return launch(model=model, port=port, tokens=128)",
    "0123456789 " * 8,
    "Hello, world! How are you today? I am a tiny model with random weights.",
]


def tokenizer(vocab_size: int) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 20, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=SPECIAL[0],
        eos_token=SPECIAL[1],
        pad_token=SPECIAL[1],
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _ids(tok: PreTrainedTokenizerFast) -> dict[str, int]:
    return {
        "vocab_size": len(tok),
        "bos_token_id": tok.bos_token_id,
        "eos_token_id": tok.eos_token_id,
        "pad_token_id": tok.pad_token_id,
    }


def gqa(tok: PreTrainedTokenizerFast) -> tuple[PreTrainedConfig, type[PreTrainedModel]]:
    # head_dim 32: the smallest head size vLLM's CPU attention takes
    # (CPUAttentionBackend.get_supported_head_sizes); 16 fails at the first request.
    config = LlamaConfig(
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
        **_ids(tok),
    )
    return config, LlamaForCausalLM


def mha(tok: PreTrainedTokenizerFast) -> tuple[PreTrainedConfig, type[PreTrainedModel]]:
    config = LlamaConfig(
        hidden_size=192,
        intermediate_size=384,
        num_hidden_layers=3,
        num_attention_heads=6,
        num_key_value_heads=6,
        head_dim=32,
        max_position_embeddings=3000,
        tie_word_embeddings=True,
        torch_dtype="bfloat16",
        **_ids(tok),
    )
    return config, LlamaForCausalLM


def swa(tok: PreTrainedTokenizerFast) -> tuple[PreTrainedConfig, type[PreTrainedModel]]:
    # Even layers attend through a 256-token window, odd layers to everything: two KV cache
    # groups in vLLM. No logit soft-capping, which the CPU attention does not take.
    config = Gemma2Config(
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        query_pre_attn_scalar=32,
        max_position_embeddings=4096,
        sliding_window=256,
        attn_logit_softcapping=None,
        final_logit_softcapping=None,
        tie_word_embeddings=True,
        torch_dtype="bfloat16",
        **_ids(tok),
    )
    return config, Gemma2ForCausalLM


def mla(tok: PreTrainedTokenizerFast) -> tuple[PreTrainedConfig, type[PreTrainedModel]]:
    config = DeepseekV2Config(
        hidden_size=128,
        intermediate_size=256,
        moe_intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        n_routed_experts=4,
        num_experts_per_tok=2,
        n_shared_experts=1,
        first_k_dense_replace=2,
        kv_lora_rank=64,
        q_lora_rank=None,
        qk_rope_head_dim=32,
        qk_nope_head_dim=32,
        v_head_dim=32,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
        **_ids(tok),
    )
    return config, DeepseekV2ForCausalLM


SHAPES = {"gqa": gqa, "mha": mha, "swa": swa, "mla": mla}


def main(out: Path, shape: str = "gqa") -> None:
    torch.manual_seed(0)
    tok = tokenizer(512)
    config, cls = SHAPES[shape](tok)
    model = cls(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)


if __name__ == "__main__":
    main(Path(sys.argv[1]), *sys.argv[2:3])
