"""Learning: failure memories opened, updated and resolved from verdicts, and fed back to prompts."""
