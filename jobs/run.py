"""``python3 -m jobs.run --plan FILE``: the run driver's command, as every RayJob and the jobs CLI
submit it (jobs/contract/run_plan.py RUN_COMMAND). The driver itself is jobs/head/driver.py (its command line: jobs/head/driver_main.py);
this name stays so that a RayJob deployed before it moved (its entrypoint is never updated in
place) still finds its driver.
"""

import sys

from jobs.head.driver_main import main

if __name__ == "__main__":
    sys.exit(main())
