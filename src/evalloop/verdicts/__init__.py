"""Verdicts: comparing a run with its rolling baseline, the statistics behind it, judge calibration."""
