"""`python -m orchestra_ops` is the `ops` command (used where the console script is not on PATH)."""

from orchestra_ops.cli import main

if __name__ == "__main__":
    main()
