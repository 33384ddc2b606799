"""`python -m envkit` runs the same entry point as the `envkit` console script."""

from envkit.cli import main

if __name__ == "__main__":
    main()
