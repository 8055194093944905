"""The exit statuses of `moa-chat` (documented in the README)."""

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
# The reader of stdout went away (`moa-chat ask … | head -1`): 128 + SIGPIPE, as a shell reports other tools.
EXIT_READER_GONE = 141
