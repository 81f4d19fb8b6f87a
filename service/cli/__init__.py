"""The ``roofwatch`` command line (Typer + Rich): commands and their output only."""
