"""Triton kernels under test.

One module per kernel, in a fixed order: ``@triton.jit`` kernel(s), the host wrapper that
launches them, a high-precision reference, and the FLOP and byte counts the roofline needs.
Tests and benchmarks in ``suites/`` import the wrapper and the reference from here.
"""
