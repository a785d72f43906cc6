"""The ``laptime`` command (also ``python -m laptime``): tools that read laptime's JSON results.

Each subcommand lives in its own module, which defines ``add_arguments(parser)`` and
``run(args) -> int``; ``SUBCOMMANDS`` maps the subcommand's name to that module and a one-line
summary. A module imports its heavy dependencies (matplotlib, say) inside ``run``, so that
``laptime --help`` stays fast and each dependency is needed only by the subcommand that uses it.

Input a subcommand cannot read (a missing or torn file, JSON that is not laptime's results) is a
``ResultsError`` from the one reader they share, ``laptime.results.read``; ``main`` answers it with
one line on stderr that names the file and what is wrong, and exit status 2, as argparse answers
a wrong command line. A command line argparse accepts but the subcommand cannot use (``--ref``
without ``--test``, a malformed ``--fail-above``) is a ``UsageError``, answered the same way: exit
status 1 stays free for ``compare --fail-above``'s verdict, "slower".
"""

import argparse
import importlib
import os
import sys

from laptime.results import ResultsError, printable


class UsageError(ValueError):
    """A command line the subcommand cannot use: the message says why, in one line."""


# name -> (module under laptime., one-line help)
SUBCOMMANDS = {
    "compare": ("compare", "The seed's table: runtime and CPU of a reference run against others "
                           "(several runs per side: median and min-max; --markdown; "
                           "--fail-above gates CI on a slowdown)."),
    "merge": ("merge", "One report over every rank's results: min/median/max, the slowest rank."),
    "plot": ("plot", "Per-iteration time series and histograms of the recorded intervals (PNG)."),
    "trace": ("trace", "The recorded intervals as a Chrome/Perfetto trace (Trace Event Format)."),
    "html": ("html", "One self-contained HTML page: tables, CPU/IO, plots; several runs side by "
                     "side, compared with the first."),
}


def _parser():
    parser = argparse.ArgumentParser(
        prog="laptime", description="Read, compare and merge laptime's JSON results."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (module, summary) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=summary, description=summary)
        p.set_defaults(_module=module)
        importlib.import_module("laptime." + module).add_arguments(p)
    return parser


def _never_raise_on_encoding():
    """A file name that is not UTF-8 (Python holds its bytes as lone surrogates) or a character
    the locale's encoding lacks ("—" in ISO-8859-9) is written escaped, never a traceback."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def check_outputs(outputs, inputs):
    """A UsageError where an output path names one of the input files: writing it would destroy
    the input, and the command would still say it succeeded."""
    for out in outputs:
        for path in inputs:
            try:
                same = os.path.samefile(out, path)
            except OSError:  # the output does not exist yet, or an input is unreadable
                same = False
            if same:
                raise UsageError(f"the output {printable(out)} is the input {printable(path)}; "
                                 "give another path")


def is_stdout(path):
    """Whether ``path`` names this process's standard output (``/dev/stdout``, its ``/proc`` link,
    the terminal or pipe itself): a command that writes its data there says the rest on stderr,
    so that ``-o /dev/stdout | jq`` reads only the data."""
    try:
        a, b = os.stat(path), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # sys.stdout replaced (a test's capture)
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def main(argv=None):
    _never_raise_on_encoding()
    args = _parser().parse_args(argv)
    try:
        return importlib.import_module("laptime." + args._module).run(args)
    except (ResultsError, UsageError) as e:
        print(f"laptime {args.command}: {printable(e)}", file=sys.stderr)
        return 2
    except ImportError as e:  # an optional dependency (matplotlib: the `reports` extra)
        if not (e.name or "").startswith("matplotlib"):
            raise
        print(f"laptime {args.command}: needs matplotlib (pip install matplotlib, or "
              "pip install '<laptime checkout>[reports]')", file=sys.stderr)
        return 2
    except OSError as e:  # an output that cannot be written (a missing folder, a full disk)
        where = f"{printable(e.filename)}: " if e.filename else ""
        print(f"laptime {args.command}: {where}{printable(e.strerror or e)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
