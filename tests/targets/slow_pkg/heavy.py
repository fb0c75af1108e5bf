"""The heavy part of ``slow_pkg`` (a model module that builds tables at import)."""

import time

time.sleep(30)
