"""Scheduling helpers: triggers (cron/every with explicit zones) and the schedule ledger."""
