"""What a repository declares about itself, read the same way by the workers that run its suites
and the service that schedules and judges them: ``[tool.roofwatch]`` suites (``declared``), a
stored suites file for commits that predate it (``external``), ``min_effect`` values, a suite's
``env`` table and its compile targets. Pure parsing on the ground floor alone: no git operation
but reading a commit's files through ``roofwatch.git``."""
