"""``python -m evalloop``: the command line (scheduled fires run themselves this way)."""

from evalloop.cli import main

if __name__ == "__main__":
    main()
