"""`python -m migrate` runs the same CLI as the `neuron-migrate` console script."""

from migrate.cli import main

if __name__ == "__main__":
    main()
