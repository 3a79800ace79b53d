"""`python -m zoo.testing.cross_backend --worker --backend B --workdir D`:
one worker of the cross-backend check (started by `run_checks`)."""

import sys

from zoo.testing.cross_backend.worker import main

sys.exit(main())
