"""Serving tools, one module each: launch.py (launch_server), status.py (server_status),
stop.py (stop_server), preflight.py (would a launch fail?) and diagnose_log.py (why did a
server fail, from any log). Beside them: launch_input.py (the launch's input and the
command line it becomes), engines.py (SGLang/vLLM presets), readiness.py (the wait for
ready), diagnose.py with diagnose_rules.py, diagnose_lines.py, diagnose_facts.py and
diagnose_fixes*.py (why a launch failed: kinds, prefixes, numbers, fixes), preflight_facts.py
and preflight_*checks.py (what preflight reads and checks), ctl.py (calls to the program on
the host) and data.py (what the tools return as data)."""
