"""Bounded retry: why a stage failed and whose fault it is (``classify_failure``), and what to do after
an attempt (``decision``): retry infrastructure, never a real failure."""
