"""Errors roofwatch turns into recorded outcomes instead of tracebacks: the root, and what a worker raises.

The root lives on the ground floor so that the workers and the service share it without importing
each other; the whole tree, with the service's errors, is drawn once, in ``service/core/errors.py``.
"""


class RoofwatchError(Exception):
    """Base of every error roofwatch reports as data."""


class CheckoutError(RoofwatchError):
    pass


class RemoteUnreachable(CheckoutError):
    pass


class UnknownRevision(CheckoutError):
    pass


class SuiteConfigError(RoofwatchError):
    pass


class ResultFileError(RoofwatchError):
    pass


class UploadFormatError(RoofwatchError):
    """A result file that cannot be read: unknown format, not JSON, truncated, missing fields."""


class UnsafePath(RoofwatchError):
    """A path that leaves its folder, goes through a link, is no regular file or is too large."""


class UnknownRepository(RoofwatchError):
    pass


class CalibrationError(RoofwatchError):
    """The device could not be measured (no such GPU, a crash, unreadable output)."""


class SandboxUnavailable(RoofwatchError, RuntimeError):
    """bubblewrap is missing or cannot create namespaces here; untrusted code must not run."""


class NvmlUnavailable(RoofwatchError):
    """NVML cannot be asked here: the message says why, ``remedy`` the one step that fixes it."""

    def __init__(self, reason: str, remedy: str) -> None:
        super().__init__(reason)
        self.remedy = remedy
