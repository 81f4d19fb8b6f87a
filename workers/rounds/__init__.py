"""The pytest plugin a benchmark suite runs under, and how the runner hands it to a sandboxed suite."""
