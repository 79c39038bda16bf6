"""Exporters: the run in other tools' formats (Perfetto / Chrome Trace Event JSON)."""
