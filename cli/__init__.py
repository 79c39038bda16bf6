"""The `flowmap` command line: one thin module per verb over library calls."""
