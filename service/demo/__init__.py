"""The demo: a kernel repository with planted changes, written from templates shipped here."""

from roofwatch.service.demo.history import PR_BRANCH, DemoError, build_demo_repository

__all__ = ["PR_BRANCH", "DemoError", "build_demo_repository"]
