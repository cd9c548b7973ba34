"""Checkpoint tools: safetensors_header and checkpoint_summary."""
