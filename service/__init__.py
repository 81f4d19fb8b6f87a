"""roofwatch service: configuration, database, analysis, tasks, API and CLI."""
