"""The ``laptime`` command (also ``python -m laptime``): tools that read laptime's JSON results.

Each subcommand lives in its own module, which defines ``add_arguments(parser)`` and
``run(args) -> int``; ``SUBCOMMANDS`` maps the subcommand's name to that module and a one-line
summary. A module imports its heavy dependencies (matplotlib, say) inside ``run``, so that
``laptime --help`` stays fast and each dependency is needed only by the subcommand that uses it.
"""

import argparse
import importlib
import sys

# name -> (module under laptime., one-line help)
SUBCOMMANDS = {
    "compare": ("compare", "The seed's table: runtime and CPU of a reference run against others "
                           "(several runs per side: median and min-max; --markdown)."),
    "merge": ("merge", "One report over every rank's results: min/median/max, the slowest rank."),
    "plot": ("plot", "Per-iteration time series and histograms of the recorded intervals (PNG)."),
    "trace": ("trace", "The recorded intervals as a Chrome/Perfetto trace (Trace Event Format)."),
    "html": ("html", "One self-contained HTML page: tables, CPU/IO, plots, a comparison."),
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


def main(argv=None):
    args = _parser().parse_args(argv)
    return importlib.import_module("laptime." + args._module).run(args)


if __name__ == "__main__":
    sys.exit(main())
