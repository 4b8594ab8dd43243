"""Metric implementations for pytest-crucible (pure functions, standard library only)."""
