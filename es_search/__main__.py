"""The ``es-search`` command's entry point. A Ctrl-C while it imports torch ends it with
one line (status 130), not a traceback: the guard is set before anything is imported."""
import sys

from .interrupt import guard_command_start


def main() -> int:
    guard_command_start()
    from .cli import main as command
    return command()


if __name__ == "__main__":
    sys.exit(main())
