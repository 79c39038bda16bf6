/* `columns._fold` in C: the merged leaves of a sequence whose elements share one shape.
 *
 * A twin of the Python function, case for case: strings, Python numbers, None, lists (sized by
 * length when they hold numbers, else flattened one level), dicts with the same str keys, tuples
 * of one length, and records of one class (read through the `__dict__` getter and slot
 * descriptors `columns` hands over). It declines (returns None) wherever the Python twin does, so
 * that twin, and behind it the element-by-element walk, stay the reference: the tests run all
 * three on the same payloads.
 *
 * Capture rules hold here too: no user code runs (types are compared by identity, keys only once
 * they are exact str, values never called or hashed), nothing is copied, nothing is kept between
 * calls, and any error is cleared into a None.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>

/* Bounds and names, set once from Python by `configure` (one source of truth: walk.py). */
static Py_ssize_t max_depth = -1, max_key = 0, max_fields = 0, max_scan = 0, max_tuple = 0,
                  max_str_scan = 1;
static PyObject *number_types[4], *number_kinds[4];
static Py_ssize_t number_sizes[4];
static int n_numbers = 0;
static PyObject *s_str, *s_none, *s_empty, *s_blank, *s_dot, *s_star, *empty_tuple;

/* Nodes each element costs: `unit` each, plus `per[i]` where `per` is not NULL; and `need`, the
 * nodes the payload's total must leave spare for every inner list to be walked whole. */
typedef struct {
    Py_ssize_t unit;
    Py_ssize_t *per;
    Py_ssize_t need;
} costs_t;

typedef struct {
    PyObject *fields_of; /* type -> (dict getter or None, [(name, slot descriptor)]) or None */
    PyObject *leaves;    /* list: the merged leaves, in the order the element walk meets them */
    PyObject *ids;       /* list: ids of the containers entered */
    Py_ssize_t *firsts;  /* per leaf: the element (of the fold that made it) it first appears in */
    Py_ssize_t cap;      /* room in `firsts` */
    Py_ssize_t nbytes;   /* the leaves' bytes */
    PyObject *top_type, *top_fields; /* how the caller already knows the items' class is read */
} ctx_t;

enum { DECLINE = 0, DONE = 1, FAILED = -1 };

static int fold(ctx_t *c, PyObject **items, Py_ssize_t n, PyObject *star, Py_ssize_t depth,
                costs_t *out);

static int number_index(PyTypeObject *t) {
    for (int i = 0; i < n_numbers; i++)
        if ((PyObject *)t == number_types[i])
            return i;
    return -1;
}

/* `lo` if all lengths are equal, else `(lo, hi)`: a folded dim. */
static PyObject *span(Py_ssize_t lo, Py_ssize_t hi) {
    if (lo == hi)
        return PyLong_FromSsize_t(lo);
    return Py_BuildValue("(nn)", lo, hi);
}

static int add_leaf(ctx_t *c, PyObject *path, PyObject *kind, PyObject *shape, Py_ssize_t nbytes,
                    Py_ssize_t count) {
    if (shape == NULL)
        return FAILED;
    PyObject *b = PyLong_FromSsize_t(nbytes), *k = PyLong_FromSsize_t(count), *leaf = NULL;
    if (b && k)
        leaf = PyTuple_Pack(8, path, kind, shape, s_blank, s_blank, b, k, Py_None);
    Py_XDECREF(b);
    Py_XDECREF(k);
    Py_DECREF(shape);
    if (leaf == NULL)
        return FAILED;
    Py_ssize_t at = PyList_GET_SIZE(c->leaves);
    if (at >= c->cap) {
        Py_ssize_t cap = c->cap ? 2 * c->cap : 64;
        Py_ssize_t *grown = PyMem_Realloc(c->firsts, sizeof(Py_ssize_t) * (size_t)cap);
        if (grown == NULL) {
            Py_DECREF(leaf);
            PyErr_NoMemory();
            return FAILED;
        }
        c->firsts = grown;
        c->cap = cap;
    }
    int r = PyList_Append(c->leaves, leaf);
    Py_DECREF(leaf);
    c->nbytes += nbytes;
    c->firsts[at] = 0; /* a leaf made here stands for all the elements, the first among them */
    return r < 0 ? FAILED : DONE;
}

/* The leaves from `start` on, stably sorted by the element they first appear in: the element
 * walk merges leaves in that order, so one only a later element has (a longer tuple) comes after
 * all of the first element's. Nearly always sorted already: an insertion sort. */
static void first_seen_order(ctx_t *c, Py_ssize_t start) {
    PyObject **leaves = &PyList_GET_ITEM(c->leaves, 0);
    Py_ssize_t end = PyList_GET_SIZE(c->leaves);
    for (Py_ssize_t i = start + 1; i < end; i++) {
        Py_ssize_t f = c->firsts[i], j = i;
        PyObject *leaf = leaves[i];
        for (; j > start && c->firsts[j - 1] > f; j--) {
            c->firsts[j] = c->firsts[j - 1];
            leaves[j] = leaves[j - 1];
        }
        c->firsts[j] = f;
        leaves[j] = leaf;
    }
}

static int add_ids(ctx_t *c, PyObject **items, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *id = PyLong_FromVoidPtr(items[i]);
        if (id == NULL || PyList_Append(c->ids, id) < 0) {
            Py_XDECREF(id);
            return FAILED;
        }
        Py_DECREF(id);
    }
    return DONE;
}

/* walk.utf8_len: UTF-8 bytes (a surrogate as its 3-byte escape), a long string from its head. */
static Py_ssize_t utf8_len(PyObject *s) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (PyUnicode_IS_ASCII(s))
        return n;
    Py_ssize_t scan = n <= max_str_scan ? n : max_str_scan, bytes = 0;
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    for (Py_ssize_t i = 0; i < scan; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        bytes += ch < 0x80 ? 1 : ch < 0x800 ? 2 : ch < 0x10000 ? 3 : 4;
    }
    return n <= max_str_scan ? bytes : bytes * n / max_str_scan;
}

static int fold_strs(ctx_t *c, PyObject **items, Py_ssize_t n, PyObject *star) {
    Py_ssize_t lo = PY_SSIZE_T_MAX, hi = 0, bytes = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t len = PyUnicode_GET_LENGTH(items[i]);
        lo = len < lo ? len : lo;
        hi = len > hi ? len : hi;
        bytes += utf8_len(items[i]);
    }
    PyObject *shape = span(lo, hi);
    PyObject *tup = shape ? PyTuple_Pack(1, shape) : NULL;
    Py_XDECREF(shape);
    return add_leaf(c, star, s_str, tup, bytes, n);
}

/* `a` + `b` + `c` as one new str (PyUnicode_FromFormat parses its format each time: slower). */
static PyObject *joined(PyObject *a, PyObject *b, PyObject *c) {
    Py_ssize_t la = PyUnicode_GET_LENGTH(a), lb = PyUnicode_GET_LENGTH(b);
    Py_ssize_t lc = c != NULL ? PyUnicode_GET_LENGTH(c) : 0;
    Py_UCS4 max = PyUnicode_MAX_CHAR_VALUE(a);
    if (PyUnicode_MAX_CHAR_VALUE(b) > max)
        max = PyUnicode_MAX_CHAR_VALUE(b);
    if (c != NULL && PyUnicode_MAX_CHAR_VALUE(c) > max)
        max = PyUnicode_MAX_CHAR_VALUE(c);
    PyObject *out = PyUnicode_New(la + lb + lc, max);
    if (out == NULL)
        return NULL;
    PyUnicode_CopyCharacters(out, 0, a, 0, la);
    PyUnicode_CopyCharacters(out, la, b, 0, lb);
    if (c != NULL)
        PyUnicode_CopyCharacters(out, la + lb, c, 0, lc);
    return out;
}

/* `star.key`, or the key alone at the top of a payload (as `walk.join` spells it). */
static PyObject *field_path(PyObject *star, PyObject *key) {
    if (PyUnicode_GET_LENGTH(star) == 0)
        return Py_NewRef(key);
    return joined(star, s_dot, key);
}

static int fold_lists(ctx_t *c, PyObject **items, Py_ssize_t n, PyObject *star, Py_ssize_t depth,
                      costs_t *out) {
    Py_ssize_t lo = PY_SSIZE_T_MAX, hi = 0, total = 0, empty = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t len = PyList_GET_SIZE(items[i]);
        lo = len < lo ? len : lo;
        hi = len > hi ? len : hi;
        total += len;
        empty += len == 0;
    }
    if (empty && empty < n)
        return DECLINE; /* an empty list's leaf is `empty`, on its own path */
    PyObject *inner = joined(star, s_star, NULL);
    if (inner == NULL)
        return FAILED;
    int r = FAILED;
    if (add_ids(c, items, n) < 0)
        goto done;
    out->unit = 1;
    if (empty) {
        r = add_leaf(c, inner, s_empty, Py_BuildValue("(n)", (Py_ssize_t)0), 0, 0);
        goto done;
    }
    PyTypeObject *number = Py_TYPE(PyList_GET_ITEM(items[0], 0));
    int num = number_index(number);
    if (num >= 0) { /* each list sized by its length: its first and last must be that number */
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_ssize_t len = PyList_GET_SIZE(items[i]);
            if (Py_TYPE(PyList_GET_ITEM(items[i], 0)) != number ||
                Py_TYPE(PyList_GET_ITEM(items[i], len - 1)) != number) {
                r = DECLINE;
                goto done;
            }
        }
        PyObject *shape = span(lo, hi);
        PyObject *tup = shape ? PyTuple_Pack(1, shape) : NULL;
        Py_XDECREF(shape);
        r = add_leaf(c, inner, number_kinds[num], tup, number_sizes[num] * total, total);
        goto done;
    }
    if (hi > max_scan) {
        r = DECLINE; /* such a list is sampled */
        goto done;
    }
    PyObject **flat = PyMem_Malloc(sizeof(PyObject *) * (size_t)(total ? total : 1));
    Py_ssize_t *per = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)n);
    if (flat == NULL || per == NULL) {
        PyMem_Free(flat);
        PyMem_Free(per);
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t len = PyList_GET_SIZE(items[i]);
        per[i] = len;
        for (Py_ssize_t j = 0; j < len; j++) {
            flat[k] = PyList_GET_ITEM(items[i], j);
            Py_INCREF(flat[k]);
            k++;
        }
    }
    costs_t sub = {0, NULL, 0};
    Py_ssize_t start = PyList_GET_SIZE(c->leaves);
    r = fold(c, flat, total, inner, depth + 1, &sub);
    for (Py_ssize_t i = 0; i < total; i++)
        Py_DECREF(flat[i]);
    PyMem_Free(flat);
    if (r == DONE) /* an element's index in the flat sequence -> its list's (`per` holds lens) */
        for (Py_ssize_t k = start; k < PyList_GET_SIZE(c->leaves); k++) {
            Py_ssize_t f = c->firsts[k], i = 0;
            while (f >= per[i])
                f -= per[i++];
            c->firsts[k] = i;
        }
    if (r == DONE) { /* each list: 1 + its elements; what it needs spare: see columns._lists */
        out->need = sub.need;
        for (Py_ssize_t i = 0, at = 0; i < n; i++) {
            Py_ssize_t len = per[i], sum = sub.unit * len;
            if (sub.per != NULL) {
                for (Py_ssize_t j = at; j < at + len; j++)
                    sum += sub.per[j];
                Py_ssize_t first = sub.unit + sub.per[at];
                if (len * first - sum > out->need)
                    out->need = len * first - sum;
            }
            at += len;
            per[i] = sum;
        }
        out->per = per;
    } else {
        PyMem_Free(per);
    }
    PyMem_Free(sub.per);
done:
    Py_DECREF(inner);
    return r;
}

/* Fold each of `nf` columns of `values` (row-major, n rows; NULL where a row is too short for
 * that column) at its path; `paths` owned here. */
static int fold_rows(ctx_t *c, PyObject **items, Py_ssize_t n, PyObject **values, Py_ssize_t nf,
                     PyObject **paths, Py_ssize_t depth, costs_t *out) {
    int r = add_ids(c, items, n);
    PyObject **col = PyMem_Malloc(sizeof(PyObject *) * (size_t)n);
    Py_ssize_t *at = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)n);
    if (col == NULL || at == NULL) {
        PyErr_NoMemory();
        r = FAILED;
    }
    out->unit = 1;
    Py_ssize_t start = PyList_GET_SIZE(c->leaves);
    int sorted = 1;
    for (Py_ssize_t j = 0; j < nf && r == DONE; j++) {
        Py_ssize_t m = 0;
        for (Py_ssize_t i = 0; i < n; i++)
            if (values[i * nf + j] != NULL) {
                col[m] = values[i * nf + j];
                at[m++] = i;
            }
        if (m == 0)
            continue; /* no row that long: not reached, the width is the longest row's */
        costs_t sub = {0, NULL, 0};
        Py_ssize_t from = PyList_GET_SIZE(c->leaves);
        r = fold(c, col, m, paths[j], depth + 1, &sub);
        if (r == DONE)
            for (Py_ssize_t k = from; k < PyList_GET_SIZE(c->leaves); k++) {
                c->firsts[k] = at[c->firsts[k]]; /* an index into the column -> the row's */
                sorted &= c->firsts[k] == 0;
            }
        if (r == DONE && sub.need > out->need)
            out->need = sub.need;
        if (r == DONE && m == n && sub.per == NULL) {
            out->unit += sub.unit;
        } else if (r == DONE) {
            if (out->per == NULL && (out->per = PyMem_Calloc((size_t)n, sizeof(Py_ssize_t))) == NULL) {
                PyErr_NoMemory();
                r = FAILED;
            }
            for (Py_ssize_t k = 0; k < m && r == DONE; k++)
                out->per[at[k]] += sub.unit + (sub.per != NULL ? sub.per[k] : 0);
        }
        PyMem_Free(sub.per);
    }
    PyMem_Free(col);
    PyMem_Free(at);
    for (Py_ssize_t j = 0; j < nf; j++)
        Py_XDECREF(paths[j]);
    if (r == DONE && !sorted)
        first_seen_order(c, start);
    return r;
}

/* The paths of `nf` columns: `star.key` for each of `keys`, or `star[j]` where `keys` is NULL;
 * -1 (none kept) on an error. */
static int make_paths(PyObject **paths, Py_ssize_t nf, PyObject *star, PyObject **keys) {
    for (Py_ssize_t j = 0; j < nf; j++) {
        if (keys != NULL) {
            paths[j] = field_path(star, keys[j]);
        } else {
            PyObject *index = PyUnicode_FromFormat("[%zd]", j);
            paths[j] = index != NULL ? joined(star, index, NULL) : NULL;
            Py_XDECREF(index);
        }
        if (paths[j] == NULL) {
            while (j > 0)
                Py_CLEAR(paths[--j]);
            return -1;
        }
    }
    return 0;
}

/* Exact str keys of `d` in order, each at most `max_key` long when `bounded`; -1 if another. */
static int str_keys(PyObject *d, PyObject **keys, int bounded) {
    Py_ssize_t pos = 0, j = 0;
    PyObject *k, *v;
    while (PyDict_Next(d, &pos, &k, &v)) {
        if (!PyUnicode_CheckExact(k) || (bounded && PyUnicode_GET_LENGTH(k) > max_key))
            return -1;
        keys[j++] = k;
    }
    return 0;
}

static int same_key(PyObject *a, PyObject *b) {
    return a == b || (PyUnicode_CheckExact(b) && PyUnicode_Compare(a, b) == 0);
}

/* Rows of `n` dicts that share their keys (and their order): `values` takes a reference to each
 * (a finalizer run by a collection mid-walk could empty a dict), given back by `release`. */
static int dict_rows(PyObject **dicts, Py_ssize_t n, Py_ssize_t nk, PyObject **keys,
                     PyObject **values, Py_ssize_t stride) {
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyDict_GET_SIZE(dicts[i]) != nk)
            return DECLINE;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t pos = 0, j = 0;
        PyObject *k, *v;
        while (PyDict_Next(dicts[i], &pos, &k, &v)) {
            if (j >= nk || !same_key(keys[j], k))
                return DECLINE;
            Py_INCREF(v);
            values[i * stride + j++] = v;
        }
    }
    return DONE;
}

static void release(PyObject **values, Py_ssize_t count) {
    if (values != NULL)
        for (Py_ssize_t i = 0; i < count; i++)
            Py_CLEAR(values[i]);
}

static int fold_dicts(ctx_t *c, PyObject **items, Py_ssize_t n, PyObject *star, Py_ssize_t depth,
                      costs_t *out) {
    Py_ssize_t nk = PyDict_GET_SIZE(items[0]);
    PyObject **keys = PyMem_Malloc(sizeof(PyObject *) * (size_t)(nk ? nk : 1));
    PyObject **values = PyMem_Calloc((size_t)(nk * n > 0 ? nk * n : 1), sizeof(PyObject *));
    PyObject **paths = PyMem_Calloc((size_t)(nk ? nk : 1), sizeof(PyObject *));
    int r = FAILED;
    if (keys == NULL || values == NULL || paths == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    r = DECLINE;
    if (str_keys(items[0], keys, 1) < 0 || dict_rows(items, n, nk, keys, values, nk) != DONE)
        goto done;
    r = make_paths(paths, nk, star, keys) < 0 ? FAILED
                                              : fold_rows(c, items, n, values, nk, paths, depth, out);
done:
    release(values, nk * n);
    PyMem_Free(keys);
    PyMem_Free(values);
    PyMem_Free(paths);
    return r;
}

/* Tuples of at most `max_tuple` items, each walked at `[i]`; where lengths differ, column `i`
 * holds the tuples long enough. */
static int fold_tuples(ctx_t *c, PyObject **items, Py_ssize_t n, PyObject *star, Py_ssize_t depth,
                       costs_t *out) {
    Py_ssize_t size = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyTuple_GET_SIZE(items[i]) > size)
            size = PyTuple_GET_SIZE(items[i]);
    if (size > max_tuple)
        return DECLINE; /* a longer tuple is folded, not indexed */
    PyObject **values = PyMem_Calloc((size_t)(size * n > 0 ? size * n : 1), sizeof(PyObject *));
    PyObject **paths = PyMem_Calloc((size_t)(size ? size : 1), sizeof(PyObject *));
    int r = FAILED;
    if (values == NULL || paths == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(items[i]); j++)
            values[i * size + j] = Py_NewRef(PyTuple_GET_ITEM(items[i], j));
    if (make_paths(paths, size, star, NULL) == 0)
        r = fold_rows(c, items, n, values, size, paths, depth, out);
done:
    release(values, size * n);
    PyMem_Free(values);
    PyMem_Free(paths);
    return r;
}

/* Records of one class, read as `containers._fields_handler` reads one: the instance dict's str
 * keys (all of them exact str, at most `max_fields`), then the slots; public fields only when
 * there are any. */
static int fold_records(ctx_t *c, PyObject **items, Py_ssize_t n, PyObject *star,
                        Py_ssize_t depth, PyTypeObject *t, costs_t *out) {
    PyObject *fields = (PyObject *)t == c->top_type ? Py_NewRef(c->top_fields)
                                                    : PyObject_CallOneArg(c->fields_of, (PyObject *)t);
    if (fields == NULL)
        return FAILED;
    int r = DECLINE;
    PyObject *getter = NULL, *slots = NULL;
    PyObject **dicts = NULL, **values = NULL, **picked = NULL, **paths = NULL, **names = NULL;
    Py_ssize_t nslots = 0, nk = 0, nf = 0, kept = 0;
    if (!PyTuple_CheckExact(fields) || PyTuple_GET_SIZE(fields) != 2)
        goto done;
    getter = PyTuple_GET_ITEM(fields, 0);
    slots = PyTuple_GET_ITEM(fields, 1);
    if (!PyList_CheckExact(slots) || (getter != Py_None && Py_TYPE(getter)->tp_descr_get == NULL))
        goto done;
    nslots = PyList_GET_SIZE(slots);
    for (Py_ssize_t s = 0; s < nslots; s++) {
        PyObject *pair = PyList_GET_ITEM(slots, s);
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2 ||
            !PyUnicode_CheckExact(PyTuple_GET_ITEM(pair, 0)) ||
            Py_TYPE(PyTuple_GET_ITEM(pair, 1))->tp_descr_get == NULL)
            goto done;
    }
    r = FAILED;
    dicts = PyMem_Calloc((size_t)n, sizeof(PyObject *));
    if (dicts == NULL)
        goto nomem;
    if (getter != Py_None) {
        for (Py_ssize_t i = 0; i < n; i++) {
            dicts[i] = Py_TYPE(getter)->tp_descr_get(getter, items[i], (PyObject *)t);
            if (dicts[i] == NULL)
                goto done;
            if (!PyDict_CheckExact(dicts[i]) || PyDict_GET_SIZE(dicts[i]) > max_fields)
                goto decline;
        }
        nk = PyDict_GET_SIZE(dicts[0]);
    }
    nf = nk + nslots;
    if (nf == 0)
        goto decline; /* no fields: the record is opaque */
    names = PyMem_Malloc(sizeof(PyObject *) * (size_t)nf);
    values = PyMem_Calloc((size_t)(nf * n), sizeof(PyObject *));
    picked = PyMem_Malloc(sizeof(PyObject *) * (size_t)(nf * n));
    paths = PyMem_Calloc((size_t)nf, sizeof(PyObject *));
    if (names == NULL || values == NULL || picked == NULL || paths == NULL)
        goto nomem;
    if (nk && (str_keys(dicts[0], names, 0) < 0 || dict_rows(dicts, n, nk, names, values, nf) != DONE))
        goto decline;
    for (Py_ssize_t s = 0; s < nslots; s++) {
        PyObject *pair = PyList_GET_ITEM(slots, s), *descr = PyTuple_GET_ITEM(pair, 1);
        names[nk + s] = PyTuple_GET_ITEM(pair, 0);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *v = Py_TYPE(descr)->tp_descr_get(descr, items[i], (PyObject *)t);
            if (v == NULL) { /* an unset slot: the element walk skips the field there */
                PyErr_Clear();
                goto decline;
            }
            values[i * nf + nk + s] = v;
        }
    }
    Py_ssize_t npub = 0;
    for (Py_ssize_t j = 0; j < nf; j++) {
        if (PyUnicode_GET_LENGTH(names[j]) > max_key)
            goto decline; /* `join` would cut it: left to the element walk */
        npub += PyUnicode_GET_LENGTH(names[j]) == 0 || PyUnicode_READ_CHAR(names[j], 0) != '_';
    }
    for (Py_ssize_t j = 0; j < nf; j++) {
        int public = PyUnicode_GET_LENGTH(names[j]) == 0 || PyUnicode_READ_CHAR(names[j], 0) != '_';
        if (npub && !public)
            continue;  /* public fields only, when there are any */
        paths[kept] = field_path(star, names[j]);
        if (paths[kept] == NULL)
            goto done;
        for (Py_ssize_t i = 0; i < n; i++)
            picked[i * (npub ? npub : nf) + kept] = values[i * nf + j];
        kept++;
    }
    r = fold_rows(c, items, n, picked, kept, paths, depth, out);
    kept = 0; /* fold_rows gave the paths back */
    goto done;
nomem:
    PyErr_NoMemory();
    r = FAILED;
    goto done;
decline:
    r = DECLINE;
done:
    for (Py_ssize_t q = 0; q < kept; q++)
        Py_DECREF(paths[q]);
    if (dicts != NULL)
        for (Py_ssize_t i = 0; i < n; i++)
            Py_XDECREF(dicts[i]);
    release(values, nf * n);
    PyMem_Free(dicts);
    PyMem_Free(values);
    PyMem_Free(picked);
    PyMem_Free(paths);
    PyMem_Free(names);
    Py_DECREF(fields);
    return r;
}

static int fold(ctx_t *c, PyObject **items, Py_ssize_t n, PyObject *star, Py_ssize_t depth,
                costs_t *out) {
    out->unit = 1;
    out->per = NULL;
    out->need = 0;
    PyTypeObject *t = Py_TYPE(items[0]);
    for (Py_ssize_t i = 1; i < n; i++)
        if (Py_TYPE(items[i]) != t)
            return DECLINE;
    if (t == &PyUnicode_Type)
        return fold_strs(c, items, n, star);
    int num = number_index(t);
    if (num >= 0)
        return add_leaf(c, star, number_kinds[num], (Py_INCREF(empty_tuple), empty_tuple),
                        number_sizes[num] * n, n);
    if (items[0] == Py_None)
        return add_leaf(c, star, s_none, (Py_INCREF(empty_tuple), empty_tuple), 0, n);
    if (depth >= max_depth)
        return DECLINE; /* a container here is opaque */
    if (t == &PyList_Type)
        return fold_lists(c, items, n, star, depth, out);
    if (t == &PyDict_Type)
        return fold_dicts(c, items, n, star, depth, out);
    if (t == &PyTuple_Type)
        return fold_tuples(c, items, n, star, depth, out);
    return fold_records(c, items, n, star, depth, t, out);
}

PyDoc_STRVAR(fold_columns_doc,
"fold_columns(items, star, depth, fields_of, fields=None)\n"
"-> (leaves, first, total, ids, need, nbytes) | None\n\n"
"The merged leaves of `items` (an exact list or tuple), each walked at `star` and `depth`:\n"
"what `columns.fold_columns` gives. `first` and `total` are the walked nodes of the first\n"
"element and of all; `ids` the containers entered; `need` the nodes the total must leave\n"
"spare under the budget; `nbytes` the leaves' bytes. `fields_of(type)` says how a record class\n"
"is read: (dict getter or None, [(name, slot descriptor)]), or None when it is no record;\n"
"`fields`, where given, says it for the first item's class.");

static PyObject *fold_columns(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs < 4 || nargs > 5 || !PyUnicode_Check(args[1]) || !PyLong_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "fold_columns(items, star, depth, fields_of, fields=None)");
        return NULL;
    }
    PyObject *seq = args[0], *star = args[1], *fields_of = args[3];
    Py_ssize_t depth = PyLong_AsSsize_t(args[2]);
    if (depth == -1 && PyErr_Occurred())
        return NULL;
    if (max_depth < 0 || !(PyList_CheckExact(seq) || PyTuple_CheckExact(seq)))
        Py_RETURN_NONE;
    /* a list could change under a call out: a tuple of its items, or the tuple itself */
    PyObject *items = PyTuple_CheckExact(seq) ? Py_NewRef(seq) : PyList_AsTuple(seq);
    if (items == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(items);
    ctx_t c = {fields_of, PyList_New(0), PyList_New(0), NULL, 0, 0, NULL, NULL};
    if (nargs == 5 && args[4] != Py_None && n > 0) {
        c.top_type = (PyObject *)Py_TYPE(PyTuple_GET_ITEM(items, 0));
        c.top_fields = args[4];
    }
    costs_t costs = {0, NULL, 0};
    PyObject *result = NULL;
    int r = n == 0 || c.leaves == NULL || c.ids == NULL
                ? DECLINE
                : fold(&c, &PyTuple_GET_ITEM(items, 0), n, star, depth, &costs);
    if (r == DONE) {
        Py_ssize_t total = costs.unit * n;
        if (costs.per != NULL)
            for (Py_ssize_t i = 0; i < n; i++)
                total += costs.per[i];
        Py_ssize_t first = costs.unit + (costs.per != NULL ? costs.per[0] : 0);
        result = Py_BuildValue("(OnnOnn)", c.leaves, first, total, c.ids, costs.need, c.nbytes);
    }
    PyMem_Free(costs.per);
    PyMem_Free(c.firsts);
    Py_DECREF(items);
    Py_XDECREF(c.leaves);
    Py_XDECREF(c.ids);
    if (result == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return result;
}

PyDoc_STRVAR(configure_doc,
"configure(max_depth, max_key, max_fields, max_scan, max_tuple, max_str_scan, numbers)\n\n"
"The bounds of walk.py and columns.py, and `numbers`: (type, kind, bytes) of each Python\n"
"number type. Until it is called, fold_columns declines everything.");

static PyObject *configure(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *numbers;
    Py_ssize_t d, k, f, s, t, ss;
    if (!PyArg_ParseTuple(args, "nnnnnnO!", &d, &k, &f, &s, &t, &ss, &PyList_Type, &numbers))
        return NULL;
    Py_ssize_t nn = PyList_GET_SIZE(numbers);
    if (nn > 4 || ss < 1) {
        PyErr_SetString(PyExc_ValueError, "at most 4 number types, and a positive string scan");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nn; i++) {
        PyObject *row = PyList_GET_ITEM(numbers, i);
        PyObject *tp, *kind;
        Py_ssize_t size;
        if (!PyArg_ParseTuple(row, "O!Un", &PyType_Type, &tp, &kind, &size))
            return NULL;
        Py_INCREF(tp);
        Py_INCREF(kind);
        Py_XSETREF(number_types[i], tp);
        Py_XSETREF(number_kinds[i], kind);
        number_sizes[i] = size;
    }
    n_numbers = (int)nn;
    max_key = k;
    max_fields = f;
    max_scan = s;
    max_tuple = t;
    max_str_scan = ss;
    max_depth = d;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"fold_columns", (PyCFunction)(void (*)(void))fold_columns, METH_FASTCALL, fold_columns_doc},
    {"configure", configure, METH_VARARGS, configure_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ccolumns",
    "A sequence of alike elements folded column by column, in C (see columns.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_ccolumns(void) {
    s_str = PyUnicode_InternFromString("str");
    s_none = PyUnicode_InternFromString("none");
    s_empty = PyUnicode_InternFromString("empty");
    s_blank = PyUnicode_InternFromString("");
    s_dot = PyUnicode_InternFromString(".");
    s_star = PyUnicode_InternFromString("[*]");
    empty_tuple = PyTuple_New(0);
    if (!s_str || !s_none || !s_empty || !s_blank || !s_dot || !s_star || !empty_tuple)
        return NULL;
    return PyModule_Create(&module);
}
