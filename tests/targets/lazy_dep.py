"""A module a target imports inside its function (a model, hydra): not preloaded."""

import json  # noqa: F401 - stdlib: already in the fork server, never learned

VALUE = 42
