"""Running a suite: binding its target and scorers, calling them under deadlines, gathering grades."""
