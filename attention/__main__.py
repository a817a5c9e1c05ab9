"""`python -m attention`: see attention/io/cli/main.py."""

import os
import sys

from .io.cli.main import main

if __name__ == "__main__":
    # tokens are user text: never fail on a terminal that cannot encode them
    sys.stdout.reconfigure(errors="backslashreplace")
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:  # `python -m attention ... | head`: the reader left, which is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = 0
    sys.exit(status)
