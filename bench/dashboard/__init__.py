"""Dashboard at scale: seed PostgreSQL with a large, realistic history and time every page on it.

    python -m bench.dashboard.seed  --database-url postgresql://… --benchmarks 1000 --commits 2000
    python -m bench.dashboard.pages --database-url postgresql://… [--requests 30]

The numbers and what they led to are in docs/performance.md ("Dashboard at scale").
"""
