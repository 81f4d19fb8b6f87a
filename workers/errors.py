"""Errors roofwatch turns into recorded outcomes instead of tracebacks.

    RoofwatchError
     ├── CheckoutError            git could not give us the tree we asked for
     │    ├── RemoteUnreachable   clone/fetch failed (bad URL, no network, not a repository)
     │    └── UnknownRevision     the SHA / ref / range does not exist in the repository
     ├── SuiteConfigError         [tool.roofwatch] is present but malformed
     ├── ResultFileError          a suite's JUnit XML / benchmark JSON is missing or unreadable
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


class UnknownRepository(RoofwatchError):
    pass
