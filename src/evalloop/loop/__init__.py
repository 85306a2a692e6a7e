"""The loop end to end: one run chained through suite, run, verdict and learning, and what it exits with."""
