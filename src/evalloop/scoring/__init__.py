"""Scorers: the registry, the built-in heuristic and LLM scorers, and per-case score vectors."""
