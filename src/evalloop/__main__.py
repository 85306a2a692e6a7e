"""``python -m evalloop``: the command line (scheduled fires run themselves this way; a fire's
process ends with its scheduler: :func:`evalloop.cli.lifecycle.die_with_the_scheduler`)."""

from evalloop.cli import main

if __name__ == "__main__":
    main()
