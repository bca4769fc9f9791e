"""`python -m kvtool`: the `kvtool` command, started as its console script starts it.

`python -m` puts the working directory first on sys.path, which the console script never does (nor does
`python -P`). In a clone's root its folders would then be top-level packages beside kvtool's own: `kernels/`
(kvtool.kernels) would shadow the `kernels` distribution that transformers imports.
"""

import sys

if not (getattr(sys.flags, "safe_path", False) or sys.flags.isolated):
    del sys.path[0]  # the working directory, put there by `-m`

from kvtool.cli.app import main  # noqa: E402  (after the working directory left sys.path)

main()
