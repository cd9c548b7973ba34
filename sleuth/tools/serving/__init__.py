"""Serving tools: launch_server, server_status, stop_server, and launch diagnosis."""
