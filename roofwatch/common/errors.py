"""Errors roofwatch turns into recorded outcomes instead of tracebacks: the root, and what a worker raises.

The whole tree, with the service's errors, is drawn in ``service/core/errors.py``; its root lives
on the ground floor so that the workers and the service share it without importing each other.

    RoofwatchError
     ├── CheckoutError            git could not give us the tree we asked for
     │    ├── RemoteUnreachable   clone/fetch failed (bad URL, no network, not a repository)
     │    └── UnknownRevision     the SHA / ref / range does not exist in the repository
     ├── SuiteConfigError         [tool.roofwatch] is present but malformed
     ├── ResultFileError          a suite's JUnit XML / benchmark JSON is missing or unreadable
     ├── UnsafePath               a commit's path leaves its worktree, is a link, no file, or too large
     ├── CalibrationError         the device's peaks could not be measured
     ├── SandboxUnavailable       bubblewrap is missing or cannot confine a suite here
     └── UnknownRepository        a name that was never registered with `roofwatch repo add`
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


class UnsafePath(RoofwatchError):
    """A path that leaves its folder, goes through a link, is no regular file or is too large."""


class UnknownRepository(RoofwatchError):
    pass


class CalibrationError(RoofwatchError):
    """The device could not be measured (no such GPU, a crash, unreadable output)."""


class SandboxUnavailable(RoofwatchError, RuntimeError):
    """bubblewrap is missing or cannot create namespaces here; untrusted code must not run."""
