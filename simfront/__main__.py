"""``python -m simfront``: the same command line as the ``simfront`` script."""

if __name__ == "__main__":
    import gc

    gc.disable()  # from the first import on (typer's); cli.main keeps it paused for the command, see its docstring

    from simfront.cli import main

    main()
