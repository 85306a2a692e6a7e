"""Suites: the Case and Suite models, loading them from YAML/JSONL, and finding one by name."""
