"""`python -m bench [--quick] [--only NAME] [--out DIR]`: see bench/suite.py."""

import sys

from bench.suite import main

sys.exit(main())
