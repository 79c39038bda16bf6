"""`python -m flowmap ...` is the `flowmap` command."""

from flowmap.cli.entry import main

main()
