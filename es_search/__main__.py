"""The ``es-search`` command's entry point: ``python -m es_search`` and the console
script (``es_search.__main__:main``). A Ctrl-C while the command imports torch (a
second or more) ends it with one line, exit status 130, not a traceback of the import:
the guard is set here, before anything heavy is imported (``import es_search`` imports
nothing), and the command's ``main()`` takes Ctrl-C over once it runs."""
import sys

from .interrupt import guard_command_start


def main() -> int:
    guard_command_start()
    from .cli import main as command
    return command()


if __name__ == "__main__":
    sys.exit(main())
