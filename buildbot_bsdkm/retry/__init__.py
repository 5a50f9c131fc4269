"""Bounded retry: why a stage failed and whose fault it is (``classify``), and what to do after an
attempt (``rules``): retry infrastructure, never a real failure."""
