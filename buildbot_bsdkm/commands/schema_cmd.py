"""``bsdkm-ci schema [-o FILE]``: the JSON Schema of ``bsdkm.yml``, for an editor to check it with.

Put it next to your configuration and name it on the file's first line, which editors using the
YAML language server (VS Code's YAML extension, Neovim, Helix, ...) read::

    bsdkm-ci schema -o .github/bsdkm.schema.json
    # yaml-language-server: $schema=bsdkm.schema.json

The schema is made from the loader's own tables, so an editor and ``bsdkm-ci`` agree on the keys
and their values; the loader still checks what a schema cannot (one key against another).
Exit 0, 2 unusable input.
"""

from __future__ import annotations

import argparse
import sys

from ..support.resources import config_schema_path
from .exit_codes import EXIT_OK
from .io import write_text


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("schema", help="the JSON Schema of bsdkm.yml, for editors",
                       description=__doc__.replace("``", ""),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", metavar="FILE", help="write it to FILE (default: standard output)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    text = config_schema_path().read_text(encoding="utf-8")
    if args.output:
        write_text(args.output, text)
    else:
        sys.stdout.write(text)
    return EXIT_OK
