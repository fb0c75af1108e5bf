"""The harness's words and limits, defined once: what a cell's outcome and verdict can be,
what each exit status means, how long a world may wait, and the root of its errors.

Everything else imports from here; this module imports nothing of the harness (and
nothing heavy: the command line reads it before it knows which command runs). The
enums are strings and ints, so a saved report and a shell see the same values as
before: ``Outcome.PASS == "PASS"``, ``json.dumps(Outcome.PASS) == '"PASS"'``.
"""

from __future__ import annotations

import enum
import sys

if sys.version_info >= (3, 11):
    StrEnum = enum.StrEnum
else:  # Python 3.10, the TPU VMs' own: the same str() and format() as 3.11's StrEnum

    class StrEnum(str, enum.Enum):
        """A string enum whose ``str()`` and ``format()`` are its value, as 3.11's."""

        __str__ = str.__str__
        __format__ = str.__format__


class Outcome(StrEnum):
    """How a world (and each of its ranks) ended; a cell adds two of its own."""

    PASS = "PASS"
    FAIL = "FAIL"  # every rank returned, but a checker refused what they returned
    ERROR = "ERROR"  # a rank raised
    HANG = "HANG"  # the deadline came first
    CRASH = "CRASH"  # a rank died of a signal or an exit the target did not choose
    #: A cell whose faults could not happen to this target: never a PASS.
    NOT_EXERCISED = "NOT-EXERCISED"
    #: A pod cell the pod itself failed (a host unreachable, a key refused): never the
    #: target's outcome; its verdict is UNEXERCISED.
    INFRA = "INFRA"


PASS, FAIL, ERROR, HANG, CRASH = Outcome.PASS, Outcome.FAIL, Outcome.ERROR, Outcome.HANG, Outcome.CRASH
NOT_EXERCISED, INFRA = Outcome.NOT_EXERCISED, Outcome.INFRA

#: What a world can end as (a cell adds NOT_EXERCISED and INFRA).
WORLD_OUTCOMES = (PASS, FAIL, ERROR, HANG, CRASH)
#: What an expected-outcomes file may name: a world's outcomes and NOT-EXERCISED, never
#: INFRA (a pod failure is not the target's to expect).
EXPECTABLE_OUTCOMES = (*WORLD_OUTCOMES, NOT_EXERCISED)
#: Which outcome names the world when ranks disagree: the one that says most.
SEVERITY = {HANG: 4, CRASH: 3, FAIL: 2, ERROR: 1, PASS: 0}


class Verdict(StrEnum):
    """What a cell's outcome means against what its scenario expects."""

    OK = "ok"
    KNOWN = "known"  # a failure the baseline already had
    UNEXPECTED = "unexpected"
    UNEXERCISED = "unexercised"  # the fault could not happen: proves nothing


OK, KNOWN, UNEXPECTED, UNEXERCISED = Verdict.OK, Verdict.KNOWN, Verdict.UNEXPECTED, Verdict.UNEXERCISED
VERDICTS = tuple(Verdict)
#: The order a report lists cells in: what needs a look first.
VERDICT_ORDER = {UNEXPECTED: 0, UNEXERCISED: 1, KNOWN: 2, OK: 3}


class Expect(StrEnum):
    """What a scenario expects of correct code."""

    PASS = "pass"
    FAIL_LOUDLY = "fail-loudly"  # a clear error on every rank, never a hang or a silent success


class ExitCode(enum.IntEnum):
    """What ``harness`` and its commands exit with. The ``#:`` comment above each status
    says when: the documentation's table of exit codes is made from them (docs/hooks.py)."""

    #: Nothing unexpected: no cell is (a known failure, or a NOT-EXERCISED cell without
    #: ``--require-exercised``, does not fail a run); explore found nothing; every
    #: difference between two reports is listed as expected.
    OK = 0
    #: Something failed that was not expected to: an unexpected cell (with
    #: ``--require-exercised``, also a NOT-EXERCISED one); a world of ``exec`` that did not
    #: pass (or meet its scenario's expectation); explore found a failure; a difference
    #: the expected-differences file does not list.
    FAILED = 1
    #: A bad option, scenario file, report or expected-differences file (the message names
    #: the file, the line and the field), or a module of an extra that is not installed.
    USAGE = 2
    #: The harness's own bug: one line (``HARNESS_DEBUG=1`` shows its traceback).
    INTERNAL = 3
    #: The pod failed, not the target: a cell it could not run (outcome INFRA: a worker
    #: unreachable, a key refused), or a cloud or local pod that could not be set up.
    POD_FAILED = 4
    #: Interrupted by Ctrl-C: 128 + SIGINT, as a shell reports it (SIGTERM and SIGHUP stop
    #: a run alike and exit 143 and 129).
    INTERRUPTED = 130


#: What a unit process (a rank, a launcher, a pod worker's host) exits with when the
#: harness failed inside it, not the target (sysexits' EX_SOFTWARE).
UNIT_FAILED = 70
#: ... and what it leaves beside its output (``rank-3.failed``): that failure's traceback,
#: which the world's report shows as the harness's, not the target's
UNIT_FAILED_SUFFIX = ".failed"
#: the name a world's leader leaves its own failure under (``leader.failed``)
LEADER = "leader"

# -- limits ------------------------------------------------------------------------

#: The longest deadline of a world, in seconds of its own clock (a scenario's timeout, the
#: CLI's --timeout): a day. World time is cheap: it passes at once while every rank waits.
MAX_TIMEOUT = 86_400
#: The same, for a fault's delays and latencies, which are given in milliseconds.
MAX_TIMEOUT_MS = MAX_TIMEOUT * 1000
#: A scenario's deadline unless it says otherwise: what a real job's collectives wait before
#: the job is called stuck (torch.distributed's default process-group timeout, 30 min).
DEFAULT_TIMEOUT = 1800.0
#: A world's seed seeds numpy, whose seeds are 32-bit.
MAX_SEED = 2**32 - 1
#: The most ranks a topology may have.
MAX_RANKS = 4096
#: The longest deadline of a pod's cell, in seconds of real time (a pod has no world clock).
MAX_POD_TIMEOUT = 600.0
#: A pod cell's deadline unless ``--timeout`` gives one: the scenario's, at most this many
#: seconds. On a pod time is the machine's: a target that hangs costs real time, as the
#: simulator's world clock does not (a scenario's deadline there is what a real job waits).
#: Above the reference targets' own waits (robust-sync's ``sync_timeout_s``, 30 s), so that
#: a pod and the simulator agree on them; a night's HANG cells run to it (15 of 36: 15 min).
POD_DEADLINE = 60.0

# -- defaults a user sees -----------------------------------------------------------

#: The workload a target belongs to unless the user says otherwise.
#: The modules an optional extra of the package brings, by import name: a command that needs
#: one that is not installed says which extra to install (exit 2), never an internal error.
EXTRAS = {"asyncssh": "pod", "distributed": "cluster", "jsonschema": "schema",
          "absl": "conformance", "torch": "torch"}

DEFAULT_WORKLOAD = "config-sync"
#: Where a workload keeps what only its checker reads (a built dataset's expected epoch, a
#: bucket's layout): a path of the simulator's view, never the target's. A pod does not
#: place these files on its workers (a worker's user may not write /var/lib); the controller
#: hands them to the checker itself.
TRUTH_DIR = "/var/lib/harness"
#: What a run's reports can be written as (``harness run --format``, ``harness report``).
FORMATS = ("terminal", "json", "junit", "markdown", "html")


class HarnessError(Exception):
    """The root of every error the harness reports to a user: each carries its exit
    status and how the command line introduces it, so that ``harness.cli.main`` maps
    every error in one place."""

    exit_code: ExitCode = ExitCode.INTERNAL
    label = "error"


class UsageError(HarnessError):
    """A bad input: an option, a scenario file, a report, a reference, a directory."""

    exit_code = ExitCode.USAGE


class PodError(HarnessError):
    """The pod could not run the cells (a worker unreachable, a key refused, the cloud
    said no): not the target's failure, so neither 0 nor 1."""

    exit_code = ExitCode.POD_FAILED
    label = "the pod failed"


def plural(n: int, word: str) -> str:
    """``1 cell``, ``2 cells``, ``0 cells``: every count a person reads, in one place."""
    return f"{n} {word}{'' if n == 1 else 's'}"
