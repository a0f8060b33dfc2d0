"""`python -m primenb.cli`: the same as the `primenb` command."""

from primenb.cli import main

raise SystemExit(main())
