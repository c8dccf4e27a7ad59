"""``python -m jobs ...``: the alias of the ``gke-grpo`` command (pyproject.toml
[project.scripts]; jobs/cli/main.py), for an environment where the project is not installed."""

import sys

from jobs.cli.main import main

sys.exit(main())
