"""Errors that name the file, record or setting at fault."""


class GearError(Exception):
    """Base class for user-facing errors (bad input, bad config)."""


class DataError(GearError):
    """Malformed or inconsistent input data; the message names file and record."""


class ConfigError(GearError):
    """An unknown or inconsistent configuration value; the message names the setting."""


class OutputError(GearError):
    """A file or folder could not be written (disk full, read-only, a file in the way); the message names it."""


class ComponentError(ConfigError):
    """A component of the user's broke its contract (ids of another type than the corpus's): every question would
    fail the same way, so a run stops at it; the message names the component's class."""


class CapacityError(ConfigError):
    """A run would need more memory or disk than the machine has (the start-up capacity check, or a build's own
    once it knows more); the message names the settings that need less."""
