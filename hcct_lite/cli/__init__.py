"""``hcct-lite``: run one experiment or a resumable grid from the command line.

hcct-lite run --task rotated-digits --scheme hcct --seed 0 --json out.json
hcct-lite compare --task rotated-digits --schemes all --seeds 0 1 2 --out runs/

The arguments are :mod:`.parser`'s, what each subcommand does :mod:`.commands`'.
"""

from __future__ import annotations

import sys

from ..training.data import DataNotFoundError
from .commands import COMMANDS
from .parser import build_parser

__all__ = ["main", "build_parser"]


def main(argv=None) -> int:
    """Run the command line; return the exit status (2 with one line on bad input)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    try:
        command = COMMANDS.get(args.command) or args.part_command  # a part's subcommand
        return command(args)
    except (ValueError, RuntimeError, OSError, DataNotFoundError) as err:
        print(f"hcct-lite: error: {_naming_the_option(str(err), argv)}", file=sys.stderr)
        return 2


# the settings whose option is not their name with dashes (parser.add_run_options)
_FLAGS = {"n_clients": "--clients"}


def _naming_the_option(message: str, argv: list) -> str:
    """``message``, led by the option given where it starts with the setting it sets.

    A setting's rule names the setting (``norm_limit must be ...``); the user typed
    ``--norm-limit``, and the line says both.
    """
    name = message.split(" ", 1)[0]
    flag = _FLAGS.get(name, "--" + name.replace("_", "-"))
    given = any(str(a) == flag or str(a).startswith(flag + "=") for a in argv)
    return f"{flag}: {message}" if given and len(flag) > 2 else message
