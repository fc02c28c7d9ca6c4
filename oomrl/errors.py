"""Typed errors shared across oomrl; the CLI maps them to exit code 1 with their message."""


class OomrlError(Exception):
    """Base class: an error whose message is fit to show a user as is."""


class DataValidationError(OomrlError):
    """Market data failed validation and must not be traded on or stored."""


class SourceUnavailableError(OomrlError):
    """A live data source could not be reached."""


class AccountHaltedError(OomrlError):
    """The account is in the absorbing HALTED state; a person must resume it."""


class OutOfMoneyError(OomrlError):
    """The agent's compute budget (tokens or money) is spent."""
