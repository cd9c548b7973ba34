"""Sleuth: investigate LLM deployments with sandboxed, audited tools."""

__version__ = "0.1.0"
