"""Correctness suite: kernels against fp64 references, with the measured error recorded."""
