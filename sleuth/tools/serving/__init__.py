"""Serving tools, one module each: launch.py (launch_server), status.py (server_status),
stop.py (stop_server). Beside them: launch_input.py (the launch's input and the command
line it becomes), engines.py (SGLang/vLLM presets), readiness.py (the wait for ready),
diagnose.py (why a launch failed), ctl.py (calls to the program on the host) and data.py
(what the tools return as data)."""
