"""`python -m attribution_dagster.cli`: the `attribution` command."""

import sys

from attribution_dagster.cli.app import main

sys.exit(main())
