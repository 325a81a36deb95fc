import sys

from precompute.cli import main

sys.exit(main())
