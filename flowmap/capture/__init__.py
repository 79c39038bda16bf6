"""Capture: runs inside the traced program. Cheap, metadata only, never raises."""
