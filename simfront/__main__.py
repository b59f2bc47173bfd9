"""``python -m simfront``: the same command line as the ``simfront`` script."""

from simfront.cli import main

if __name__ == "__main__":
    main()
