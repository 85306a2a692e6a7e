"""Reports of runs: terminal tables, JSON documents (and, later, JUnit, Markdown, HTML)."""
