"""``python -m jobs ...``: the jobs CLI (jobs/cli.py)."""

import sys

from jobs.cli import main

sys.exit(main())
