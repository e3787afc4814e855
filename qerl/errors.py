"""User-facing errors: one clear message that names the fix, no traceback needed."""

from __future__ import annotations


class UserError(ValueError):
    """Bad input from the user (path, config, option). Command-line entry points print it and exit with code 2."""


class NotNVFP4CheckpointError(UserError):
    pass


class AdapterMismatchError(UserError):
    pass
