"""File tools: read_lines, grep, list_dir, read_json, and the secret scanning they share."""
