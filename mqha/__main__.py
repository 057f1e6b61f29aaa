"""``python -m mqha``: the same as the ``mqha`` command."""

import sys

from mqha.cli import main

if __name__ == "__main__":
    sys.exit(main())
