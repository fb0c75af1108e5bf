"""A package whose ``__init__`` takes longer than any test's deadline to import: a
rank still importing it is named by the package's dotted name, never ``__init__``."""

from slow_pkg import heavy  # noqa: F401 - its import is what takes the time
