"""One exception type for input the user can fix; the CLI prints it as a single line."""


class FrdError(ValueError):
    """Bad input or a missing resource, with a message that names the problem and the fix."""
