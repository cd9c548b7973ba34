"""Environment tools: python_env, gpu_info and list_containers."""
