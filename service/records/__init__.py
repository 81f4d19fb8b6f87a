"""The database in and out: ingest, runs, series, comparisons, changes. No Celery, git or GitHub."""
