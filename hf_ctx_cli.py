"""Entry point of the `hf-ctx` console script.

It sits outside the `hf_ctx` package on purpose. Importing anything from the package runs `hf_ctx/__init__.py`,
which imports torch and transformers to register hf_ctx's models with the Auto classes: seconds, before argparse
could answer `--help`. So this module loads `hf_ctx/tools/cli.py` (standard library only) by its path, without running
the package's `__init__`; a subcommand imports the package when it runs. The command line itself lives in
`hf_ctx/tools/cli.py`.
"""

import importlib.util
import os
import sys


def main(argv=None):
    package = importlib.util.find_spec("hf_ctx")  # finds the package; does not import it
    if package is None or not package.submodule_search_locations:
        raise SystemExit("error: the hf_ctx package is not installed")
    path = os.path.join(list(package.submodule_search_locations)[0], "tools", "cli.py")
    # Named "hf_ctx.tools.cli", so the relative imports of its subcommands (`from .convert_elmo import ...`) import
    # the real package when they run.
    spec = importlib.util.spec_from_file_location("hf_ctx.tools.cli", path)
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    return cli.main(argv)


if __name__ == "__main__":
    sys.exit(main())
