"""Scheduler-side core of the v1 engine."""
