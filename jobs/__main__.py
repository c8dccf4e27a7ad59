"""``python -m jobs ...``: the jobs CLI (jobs/cli/main.py)."""

import sys

from jobs.cli.main import main

sys.exit(main())
