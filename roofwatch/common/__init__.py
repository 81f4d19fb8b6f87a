"""The ground floor both sides stand on: what the service and its GPU workers share, and nothing else.

- ``settings``: the settings every process reads (broker, data dir, suite limits); the service's
  ``Settings`` extends them with its credentials, which a worker never holds.
- ``errors``: the root of every error roofwatch reports as data, and the ones a worker raises.
- ``redaction``: what a secret looks like, taken out of text before it is written anywhere.
- ``jobs``: what the service asks a worker to do (measure a commit, an A/B of two), as plain data.
- ``envelope``: the result a worker returns, the only thing it hands the service.
- ``metrics``: the benchmarks derived from a measured one (its peak memory) and their suites.
- ``task_names``: every Celery task's name and the queue it runs on, spelled once.
- ``celery_app``: the Celery app both sides send and serve through.

Nothing here imports the service, the workers, the dashboard or the measuring harness.
"""
