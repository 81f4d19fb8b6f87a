"""Every error roofwatch turns into a recorded outcome or a clear message, in one tree.

    RoofwatchError                    base; defined in ``roofwatch.common.errors`` so workers need nothing of service
     ├── CheckoutError                git could not give us the tree we asked for
     │    ├── RemoteUnreachable       clone/fetch failed (bad URL, no network, not a repository)
     │    └── UnknownRevision         the SHA / ref / range does not exist in the repository
     ├── SuiteConfigError             [tool.roofwatch] is present but malformed
     ├── ResultFileError              a suite's JUnit XML / benchmark JSON is missing or unreadable
     ├── UnsafePath                   a commit's path leaves its worktree, is a link, no file, or too large
     ├── CalibrationError             the device's peaks could not be measured
     ├── SandboxUnavailable           bubblewrap is missing or cannot confine a suite on this host
     ├── NvmlUnavailable              NVML cannot be asked (no nvidia-ml-py, no driver); ``remedy`` says what to do
     ├── UnknownRepository            a repository nobody registered, or a name that is not OWNER/NAME
     ├── IngestError                  an envelope that cannot be stored (unknown run, foreign version)
     ├── TriageError                  an unknown change or triage state
     ├── PullRequestError             a pull request that cannot be measured
     ├── PayloadError                 a signed webhook body that is not a JSON object roofwatch can read
     ├── CsvHistoryError              an external history (``roofwatch changepoints --csv``) that cannot be read
     ├── UploadFormatError            an uploaded result file that cannot be read (format, JSON, fields);
     │                                on the ground floor: ``roofwatch.result_files`` raises it
     ├── UploadError                  an upload that cannot be stored (unknown SHA, missing base, device mismatch)
     └── GitHubError                  GitHub answered with an error (``status`` is its HTTP status, if any)
          └── RetryableGitHubError    ... one worth retrying later (5xx, rate limit); ``retry_after`` in s

Entry points catch ``RoofwatchError`` alone: the CLI prints it and exits 2, the API answers
4xx, tasks record it on the run or delivery. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

from roofwatch.common.errors import (
    CalibrationError,
    CheckoutError,
    NvmlUnavailable,
    RemoteUnreachable,
    ResultFileError,
    RoofwatchError,
    SandboxUnavailable,
    SuiteConfigError,
    UnknownRepository,
    UnknownRevision,
    UnsafePath,
    UploadFormatError,
)

__all__ = [
    "CalibrationError", "CheckoutError", "CsvHistoryError", "GitHubError", "IngestError", "PayloadError", "PullRequestError",
    "RemoteUnreachable", "ResultFileError", "RetryableGitHubError", "RoofwatchError", "SandboxUnavailable", "SuiteConfigError",
    "TriageError", "UnknownRepository", "UnknownRevision", "UnsafePath", "UploadError", "UploadFormatError",
    "ArtifactLookupError", "DemoError", "NvmlUnavailable",
]


class IngestError(RoofwatchError):
    """The envelope cannot be stored (unknown run, foreign version, key mismatch)."""


class TriageError(RoofwatchError, ValueError):
    """Unknown change or state."""


class PullRequestError(RoofwatchError):
    """The pull request cannot be measured (unfetchable repository, missing commit)."""


class PayloadError(RoofwatchError, ValueError):
    """A webhook body that is not JSON, nests too deep, or holds a number no GitHub payload has."""


class CsvHistoryError(RoofwatchError):
    """An external history that cannot be read as commit, then one number per benchmark."""


class UploadError(RoofwatchError):
    """An upload that cannot be stored: unknown repository or SHA, missing base, device mismatch."""


class GitHubError(RoofwatchError):
    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RetryableGitHubError(GitHubError):
    def __init__(self, message: str, status: int | None, retry_after: float | None) -> None:
        super().__init__(message, status)
        self.retry_after = retry_after


class ArtifactLookupError(RoofwatchError):
    """The commit is unknown, ambiguous, or has no compiled artifacts."""


class DemoError(RoofwatchError):
    """The demo repository cannot be written where it was asked for."""


class VerdictInputError(RoofwatchError):
    """The files or options given to ``roofwatch verdict`` cannot be compared."""
