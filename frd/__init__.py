"""frd: what each way of sharing knowledge costs on the wire, and what it buys."""

__version__ = "0.1.0"
