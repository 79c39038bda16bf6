"""Tables: pandas DataFrame/Series, pyarrow Table/RecordBatch/(Chunked)Array, datasets.Dataset.

A table is one leaf per column (`batch.reward`), so a seam shows which columns
cross it and what each weighs:

- pyarrow: `kind="arrow"`, bytes are pyarrow's own `nbytes` (the buffer ranges
  the column references; a slice counts its part). Each buffer is a piece in
  the `cpu` address space, so a table and its slice in one hop count once.
- pandas: a column backed by numpy is that array (`kind="ndarray"`; object
  columns sized from a sample of their elements); an Arrow-backed column is
  its pyarrow array; masked and categorical columns count their parts. A
  non-range index is one more leaf, `<path>[index]`.
- `datasets.Dataset`: its Arrow table (and, after `select`/`shuffle`, its
  indices mapping as `<path>[indices]`), not the object's private fields.

Only the first `MAX_COLUMNS` columns get leaves; the rest are extrapolated.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from flowmap.capture.describers import introspect
from flowmap.capture.describers.numpy_ import ndarray_handler
from flowmap.capture.describers.walk import Walk, enter, join, key_text, register_resolver, short

MAX_COLUMNS = 128
MAX_CHUNKS = 256  # chunks of one column whose buffers are deduplicated; the rest are summed


# -- pyarrow -------------------------------------------------------------------------
def _arrow_pieces(w: Walk, chunk: Any) -> int:
    """Add one array's buffers as pieces weighted by its `nbytes`; returns the first address."""
    nbytes = chunk.nbytes
    buffers = [b for b in chunk.buffers() if b is not None and b.size]
    size = sum(b.size for b in buffers)
    left = nbytes
    for i, b in enumerate(buffers):  # nbytes shared out by buffer size, summing exactly
        share = left if i == len(buffers) - 1 else b.size * nbytes // size
        left -= share
        w.piece("cpu", b.address, b.address + b.size, share)
    return buffers[0].address if buffers else 0


def arrow_column(w: Walk, col: Any, path: str) -> None:
    """A pyarrow Array or ChunkedArray as one leaf."""
    chunked = hasattr(col, "num_chunks")
    nbytes = col.nbytes
    first = 0
    counted = 0
    for i in range(min(col.num_chunks, MAX_CHUNKS) if chunked else 1):
        chunk = col.chunk(i) if chunked else col
        addr = _arrow_pieces(w, chunk)
        first = first or addr
        counted += chunk.nbytes
    w.plain += nbytes - counted  # chunks past MAX_CHUNKS: summed, not deduplicated
    w.add((path, "arrow", (len(col),), short(str(col.type)), "cpu", nbytes, 1,
           w.dims.get(path) if w.dims else None))
    if first:
        w.storage(first, "cpu", col)


def _arrow_array(w: Walk, arr: Any, path: str, depth: int) -> None:
    arrow_column(w, arr, path)


def arrow_table(w: Walk, table: Any, path: str, depth: int) -> None:
    """A pyarrow Table or RecordBatch: one leaf per column."""
    if enter(w, table, path, depth):
        names = table.column_names
        _columns(w, len(names), lambda i: arrow_column(w, table.column(i), join(path, names[i])))


def _columns(w: Walk, n: int, describe_column: Callable[[int], None]) -> None:
    """The first MAX_COLUMNS columns as leaves; the bytes of the rest extrapolated from them."""
    before = w.total()
    for i in range(min(n, MAX_COLUMNS)):
        if w.full:
            break
        describe_column(i)
    if n > MAX_COLUMNS:
        w.plain += (w.total() - before) * (n - MAX_COLUMNS) // MAX_COLUMNS


# -- pandas --------------------------------------------------------------------------
def _pandas_values(w: Walk, values: Any, path: str, depth: int) -> None:
    """A column's values: a numpy array, or an extension array by its parts."""
    np = sys.modules["numpy"]
    if introspect.has_base(type(values), np.ndarray):
        ndarray_handler(w, values, path, depth)
        return
    d = introspect.instance_dict(values) or {}
    if "_pa_array" in d:  # Arrow-backed (the default for strings in pandas 3)
        arrow_column(w, d["_pa_array"], path)
    elif "_ndarray" in d:  # numpy-backed extension arrays (python strings, datetimes)
        ndarray_handler(w, d["_ndarray"], path, depth)
    elif "_data" in d and "_mask" in d:  # nullable integers, floats, booleans
        ndarray_handler(w, d["_data"], path, depth)
        ndarray_handler(w, d["_mask"], f"{path}[mask]", depth)
    elif "_codes" in d:  # categorical: codes per row plus the categories
        ndarray_handler(w, d["_codes"], path, depth)
        dtype_d = introspect.instance_dict(d.get("_dtype")) or {}
        categories = dtype_d.get("_categories")
        if categories is not None:
            _pandas_index(w, categories, f"{path}[categories]", depth)
    else:
        w.opaque(path, type(values))


def _pandas_index(w: Walk, index: Any, path: str, depth: int) -> None:
    pd = sys.modules["pandas"]
    if introspect.has_base(type(index), pd.RangeIndex):
        return  # start, stop, step: no data
    d = introspect.instance_dict(index) or {}
    if "_data" in d:
        _pandas_values(w, d["_data"], path, depth)


def dataframe(w: Walk, df: Any, path: str, depth: int) -> None:
    if not enter(w, df, path, depth):
        return
    mgr = (introspect.instance_dict(df) or {})["_mgr"]
    labels = mgr.items
    _columns(w, len(labels), lambda i: _pandas_values(
        w, mgr.iget_values(i), join(path, key_text(labels[i])), depth + 1))
    _pandas_index(w, mgr.axes[1], f"{path}[index]", depth + 1)


def series(w: Walk, s: Any, path: str, depth: int) -> None:
    if not enter(w, s, path, depth):
        return
    mgr = (introspect.instance_dict(s) or {})["_mgr"]
    _pandas_values(w, mgr.internal_values(), path, depth + 1)
    _pandas_index(w, mgr.axes[0], f"{path}[index]", depth + 1)


# -- datasets ------------------------------------------------------------------------
def dataset(w: Walk, ds: Any, path: str, depth: int) -> None:
    d = introspect.instance_dict(ds) or {}
    table = (introspect.instance_dict(d["_data"]) or {})["table"]
    arrow_table(w, table, path, depth)
    indices = d.get("_indices")
    if indices is not None:
        idx_table = (introspect.instance_dict(indices) or {}).get("table")
        if idx_table is not None and idx_table.num_columns:
            arrow_column(w, idx_table.column(0), f"{path}[indices]")


def resolve(t: type, mro: tuple[type, ...]) -> Any:
    root = introspect.type_module(t).partition(".")[0]
    if root == "pyarrow" or any(introspect.type_module(k).startswith("pyarrow") for k in mro):
        pa = sys.modules.get("pyarrow")
        if pa is None:
            return None
        if introspect.has_base(t, pa.Table) or introspect.has_base(t, pa.RecordBatch):
            return arrow_table
        if introspect.has_base(t, pa.Array) or introspect.has_base(t, pa.ChunkedArray):
            return _arrow_array
        return None
    pd = sys.modules.get("pandas")
    if pd is not None:
        if introspect.has_base(t, pd.DataFrame):
            return dataframe
        if introspect.has_base(t, pd.Series):
            return series
    ds = sys.modules.get("datasets")
    if ds is not None and introspect.has_base(t, getattr(ds, "Dataset", None)):
        return dataset
    return None


register_resolver(resolve)
