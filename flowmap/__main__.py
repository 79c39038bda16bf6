"""`python -m flowmap ...` is the `flowmap` command."""

from flowmap.cli.main import main

main()
