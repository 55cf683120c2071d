"""``python -m ocrflow.cli``: the ``ocrflow`` command."""

from ocrflow.cli import main

if __name__ == "__main__":  # not when a spawned process imports the main module
    main()
