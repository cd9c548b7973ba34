"""Checkpoint tools: safetensors_header and checkpoint_summary.

models.py holds what they return, render.py their text, summarize.py where a checkpoint's
summary is computed (the host's python3, in process, or over SFTP).
"""
