"""A module of the user's that a target imports inside its function (the model code):
never preloaded itself, but the installed package it imports (as hydra) is learned."""

import json  # noqa: F401 - stdlib: already in the fork server, never learned

import iniconfig  # noqa: F401 - installed, imported only through this module

VALUE = 42
