"""A module whose import takes longer than any test's deadline (a heavy model module)."""

import time

time.sleep(30)
