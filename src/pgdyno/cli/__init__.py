"""The command line: thin wiring from arguments to the core, errors to exit codes."""
