"""The investigation loop and its brains."""
