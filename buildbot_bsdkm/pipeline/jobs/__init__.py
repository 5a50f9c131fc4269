"""The job drivers: the matrix (``bsdkm-ci run``), a release candidate, a bisection, a worker's check-up.

Each builds ``Job``s and runs their stages; the shells call these and nothing below them.
"""
