"""``python -m bench.changepoints``: the acceptance run (``acceptance.py``); ``run.py`` and ``speed.py`` are beside it."""

import sys

from bench.changepoints.acceptance import main

sys.exit(main())
