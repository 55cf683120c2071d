"""``python -m ocrflow``: the command line."""

from ocrflow.cli import main

if __name__ == "__main__":
    main()
