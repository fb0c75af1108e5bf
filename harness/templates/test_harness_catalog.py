"""The harness's fault catalog against your code, as pytest tests. `harness init` wrote this.

    python -m pytest {test_file}

One test per scenario; a cell whose fault could not happen to your code is skipped with the
reason, never passed. Each failure prints the diagnosis and a replay command.
"""

import pytest

from harness.pytest_plugin import catalog_cases, check_cell


@pytest.mark.parametrize("case", catalog_cases("{target}", workload="{workload}"))
def test_catalog(case):
    check_cell(case)
