"""pytest plugin: replay recorded investigations in a user's own tests (filled by the replay work)."""
