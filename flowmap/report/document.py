"""`report --json` lives in the model (`flowmap.model.document`): this is its old import path."""

from flowmap.model.document import REPORT_SCHEMA, report_document

__all__ = ["REPORT_SCHEMA", "report_document"]
