"""`python -m supervisor.cli ...`: the same as the `zeus` command."""

import sys

from supervisor.cli.main import main

sys.exit(main())
