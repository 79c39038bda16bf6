"""Reports of a run: the stable JSON document and the terminal tables."""
