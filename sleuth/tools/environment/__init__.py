"""Environment tools: python_env and gpu_info."""
