/* The two loops of a hop that Python makes slow, for the common payload: a dict of CPU tensors.
 *
 * `tensor_entries` is `torch_.tensor_dict`'s inline loop and `disjoint_total` is the fast case of
 * `walk.space_total`. Each does exactly what its Python twin does and gives up (returns early, or
 * None) wherever the twin would take its general path, so the Python code stays the reference:
 * flowmap runs the same without this module (it is built when a compiler is there, and
 * FLOWMAP_PURE_PYTHON=1 turns it off).
 *
 * Capture rules hold here too: metadata only (the five reads below are torch's own C getters on
 * an exact torch.Tensor; no user code runs), no exception escapes (an error stops the loop and is
 * cleared: Python takes over at that entry). Nothing read from a tensor is kept between calls:
 * every fact is read again at every hop (a shape can change in place). What is kept is the last
 * leaf built for each path (`known`), a candidate only: it stands for the new leaf where every
 * field compares equal to what was just read, so a seam's schema compares equal to its last one
 * by identity, and no leaf is built or freed per hop.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>

static PyObject *s_tensor, *s_cpu, *one, *zero;

/* `known` is cleared past this many paths (payloads whose keys are made on the fly). */
#define MAX_KNOWN 4096
/* Dims of a shape read in C; a tensor with more goes the Python way. */
#define MAX_DIMS 64

/* torch's own readers, taken from `torch._C.TensorBase.__dict__` by the caller (`torch_.bind`):
 * what `t.data_ptr()`, `t.is_cpu`... resolve to on an exact torch.Tensor, called without looking
 * the name up each time. `t.nbytes` is not read: a contiguous tensor's is its shape's product
 * times its dtype's item size, which is what torch computes it from. */
enum { DATA_PTR, IS_CPU, IS_CONTIGUOUS, SHAPE, DTYPE, READERS };

static PyObject *get(PyObject *const *readers, int which, PyObject *v) {
    PyObject *r = readers[which];
    if (which == DATA_PTR || which == IS_CONTIGUOUS)
        return PyObject_CallOneArg(r, v);  /* a method descriptor, given its self */
    return Py_TYPE(r)->tp_descr_get(r, v, (PyObject *)Py_TYPE(v));  /* a getset descriptor */
}

/* The elements of `shape` (a tuple of ints, as torch.Size is) into `dims`, and their product
 * times `itemsize` into `nbytes`; 0 where one is not a non-negative int, there are too many, or
 * the product would overflow (Python counts those). */
static int shape_bytes(PyObject *shape, Py_ssize_t itemsize, Py_ssize_t *dims, Py_ssize_t *ndim,
                       Py_ssize_t *nbytes) {
    if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) > MAX_DIMS)
        return 0;
    Py_ssize_t n = PyTuple_GET_SIZE(shape), total = itemsize;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyTuple_GET_ITEM(shape, i);
        if (!PyLong_CheckExact(x))
            return 0;
        Py_ssize_t d = PyLong_AsSsize_t(x);
        if (d < 0) { /* negative, or past a Py_ssize_t */
            PyErr_Clear();
            return 0;
        }
        if (__builtin_mul_overflow(total, d, &total))
            return 0;
        dims[i] = d;
    }
    *ndim = n;
    *nbytes = total;
    return 1;
}

/* Whether `x` is a tuple of str (the dims of a leaf, as `flowmap.hop(dims=)` is usually given). */
static int str_tuple(PyObject *x) {
    if (!PyTuple_CheckExact(x))
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(x); i++)
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(x, i)))
            return 0;
    return 1;
}

/* Whether `old`, a leaf this loop built for `path` at an earlier hop, holds what was just read:
 * the same path, shape, dtype name, bytes and dims (its kind, device and count are this loop's
 * constants). -1 on an error. */
static int same_leaf(PyObject *old, PyObject *path, const Py_ssize_t *dims, Py_ssize_t ndim,
                     PyObject *dtype, Py_ssize_t nbytes, PyObject *named) {
    if (!PyTuple_CheckExact(old) || PyTuple_GET_SIZE(old) != 8)
        return 0;
    PyObject *shape = PyTuple_GET_ITEM(old, 2), *nb = PyTuple_GET_ITEM(old, 5);
    if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) != ndim || !PyLong_CheckExact(nb))
        return 0;
    for (Py_ssize_t i = 0; i < ndim; i++) {
        PyObject *x = PyTuple_GET_ITEM(shape, i);
        if (!PyLong_CheckExact(x) || PyLong_AsSsize_t(x) != dims[i])
            return PyErr_Occurred() ? -1 : 0;
    }
    if (PyLong_AsSsize_t(nb) != nbytes)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *pairs[3][2] = {{PyTuple_GET_ITEM(old, 0), path}, {PyTuple_GET_ITEM(old, 3), dtype},
                             {PyTuple_GET_ITEM(old, 7), named}};
    for (int i = 0; i < 3; i++) {
        PyObject *a = pairs[i][0], *b = pairs[i][1];
        if (a == b)
            continue;
        if (!(PyUnicode_CheckExact(a) && PyUnicode_CheckExact(b)) &&
            !(i == 2 && str_tuple(a) && str_tuple(b)))
            return 0;  /* compared only where no user code can run: a new leaf is built */
        int eq = PyObject_RichCompareBool(a, b, Py_EQ);
        if (eq <= 0)
            return eq;
    }
    return 1;
}

/* One entry: its leaf (NULL past the leaf bound), piece and storage, or -1 (error cleared) / 0
 * (not an entry this loop takes) with nothing built. */
static int read_entry(PyObject *k, PyObject *v, PyObject *const *readers, PyObject *prefix,
                      PyObject *dims, PyObject *dtypes, PyObject **last_dt, PyObject **last_facts,
                      PyObject *known, int with_leaf, PyObject **leaf, PyObject **piece,
                      PyObject **ptr_out) {
    int taken = 0;
    PyObject *ptr = NULL, *flag = NULL, *shape = NULL, *dtype = NULL, *nbytes = NULL, *end = NULL;
    PyObject *path = NULL, *old = NULL;
    Py_ssize_t sizes[MAX_DIMS], ndim = 0, nb = 0;
    ptr = get(readers, DATA_PTR, v);
    if (ptr == NULL || !PyLong_CheckExact(ptr) || PyObject_Not(ptr) != 0) goto out;
    flag = get(readers, IS_CPU, v);
    if (flag != Py_True) goto out;
    Py_DECREF(flag);
    flag = get(readers, IS_CONTIGUOUS, v);
    if (flag != Py_True) goto out;
    shape = get(readers, SHAPE, v);
    if (shape == NULL) goto out;
    PyObject *dt = get(readers, DTYPE, v);
    if (dt == NULL) goto out;
    /* (name, item size); a dtype not named yet: Python names it and notes its item size. A
     * hop's tensors mostly share one dtype: the last one's facts serve again (both borrowed
     * from `dtypes`, which holds them and is never emptied). */
    PyObject *facts = dt == *last_dt ? *last_facts : PyDict_GetItemWithError(dtypes, dt);
    if (facts != NULL) {
        *last_dt = dt;
        *last_facts = facts;
    }
    Py_DECREF(dt);
    if (facts == NULL || !PyTuple_CheckExact(facts) || PyTuple_GET_SIZE(facts) != 2) goto out;
    dtype = PyTuple_GET_ITEM(facts, 0);
    PyObject *size = PyTuple_GET_ITEM(facts, 1);
    if (!PyUnicode_CheckExact(dtype) || !PyLong_CheckExact(size)) {
        dtype = NULL;
        goto out;
    }
    Py_INCREF(dtype);
    Py_ssize_t itemsize = PyLong_AsSsize_t(size);
    if (itemsize <= 0 || !shape_bytes(shape, itemsize, sizes, &ndim, &nb)) goto out;
    if (PyUnicode_GET_LENGTH(prefix) > 0) {
        path = PyUnicode_Concat(prefix, k);
    } else {
        path = k;  /* a top-level key is its own path */
        Py_INCREF(path);
    }
    if (path == NULL) goto out;
    PyObject *named = Py_None;
    if (dims != Py_None) {
        named = PyDict_GetItemWithError(dims, path);
        if (named == NULL) {
            if (PyErr_Occurred()) goto out;
            named = Py_None;
        }
    }
    old = PyDict_GetItemWithError(known, path);
    int same = 0;
    if (old != NULL) {
        Py_INCREF(old);
        same = same_leaf(old, path, sizes, ndim, dtype, nb, named);
    } else if (PyErr_Occurred()) {
        goto out;
    }
    if (same < 0) goto out;
    if (same) {
        nbytes = PyTuple_GET_ITEM(old, 5);
        Py_INCREF(nbytes);
    } else {
        nbytes = PyLong_FromSsize_t(nb);
        if (nbytes == NULL) goto out;
    }
    end = PyNumber_Add(ptr, nbytes);
    if (end == NULL) goto out;
    *piece = PyTuple_Pack(3, ptr, end, nbytes);
    if (*piece == NULL) goto out;
    if (with_leaf) {
        if (same) {
            *leaf = old;
            Py_INCREF(old);
        } else {
            *leaf = PyTuple_Pack(8, path, s_tensor, shape, dtype, s_cpu, nbytes, one, named);
            if (*leaf == NULL) goto out;
            if (PyDict_GET_SIZE(known) >= MAX_KNOWN)
                PyDict_Clear(known);
            if (PyDict_SetItem(known, path, *leaf) < 0) {
                Py_CLEAR(*leaf);
                goto out;
            }
        }
    }
    *ptr_out = ptr;
    ptr = NULL;
    taken = 1;
out:
    if (!taken) {
        Py_CLEAR(*piece);
        taken = PyErr_Occurred() ? -1 : 0;
        PyErr_Clear();
    }
    Py_XDECREF(ptr);
    Py_XDECREF(flag);
    Py_XDECREF(shape);
    Py_XDECREF(dtype);
    Py_XDECREF(nbytes);
    Py_XDECREF(end);
    Py_XDECREF(path);
    Py_XDECREF(old);
    return taken;
}

PyDoc_STRVAR(tensor_entries_doc,
"tensor_entries(d, tensor_type, readers, dtypes, prefix, max_key, dims, leaves, pieces,\n"
"               storages, room, known, holders)\n"
"-> (taken, full)\n\n"
"Walk `d`'s entries in order while each is an exact `tensor_type` under a str key of at most\n"
"`max_key` characters, on the CPU, contiguous, with data and a dtype in `dtypes` (a dtype ->\n"
"(name, item size) dict): append its leaf to `leaves` (while `room` lasts), its piece to `pieces` and its\n"
"address to `storages` (the tensor to `holders`: the writer keeps a storage's id only while\n"
"it lives). `readers` are torch's data_ptr, is_cpu, is_contiguous, shape and dtype\n"
"descriptors. `known` maps a path to the last leaf built for it, which stands for the new one\n"
"where they are equal. `taken` counts the entries done; `full` says one more came past the leaf\n"
"bound (its bytes counted, its leaf dropped) and the walk stops there.");

/* Python's `n` conversion of an argument (an int, or an object with `__index__`). */
static int ssize_arg(PyObject *x, Py_ssize_t *out) {
    *out = PyNumber_AsSsize_t(x, PyExc_OverflowError);
    return !(*out == -1 && PyErr_Occurred());
}

/* Called once per hop: its arguments are read by hand (METH_FASTCALL), not parsed from a
 * format string, which cost as much as reading one tensor. */
static PyObject *tensor_entries(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 13) {
        PyErr_Format(PyExc_TypeError, "tensor_entries() takes 13 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *d = args[0], *ttype = args[1], *readers = args[2], *dtypes = args[3],
             *prefix = args[4], *dims = args[6], *leaves = args[7], *pieces = args[8],
             *storages = args[9], *known = args[11], *holders = args[12];
    Py_ssize_t max_key, room;
    if (!PyDict_Check(d) || !PyTuple_Check(readers) || !PyDict_Check(dtypes) ||
        !PyUnicode_Check(prefix) || !PyList_Check(leaves) || !PyList_Check(pieces) ||
        !PyList_Check(storages) || !PyDict_CheckExact(known) || !PyList_Check(holders)) {
        PyErr_SetString(PyExc_TypeError, "tensor_entries(): an argument of the wrong type");
        return NULL;
    }
    if (!ssize_arg(args[5], &max_key) || !ssize_arg(args[10], &room))
        return NULL;
    if (PyTuple_GET_SIZE(readers) != READERS)
        return Py_BuildValue("(ni)", (Py_ssize_t)0, 0);
    for (int i = 0; i < READERS; i++) {
        PyObject *r = PyTuple_GET_ITEM(readers, i);
        int method = i == DATA_PTR || i == IS_CONTIGUOUS;
        if (method ? !PyCallable_Check(r) : Py_TYPE(r)->tp_descr_get == NULL)
            return Py_BuildValue("(ni)", (Py_ssize_t)0, 0);
    }
    PyObject *const *rs = &PyTuple_GET_ITEM(readers, 0);
    Py_ssize_t pos = 0, taken = 0;
    int full = 0;
    PyObject *k, *v, *last_dt = NULL, *last_facts = NULL;
    if (dims != Py_None && !PyDict_CheckExact(dims)) /* another Mapping: Python reads it */
        return Py_BuildValue("(ni)", taken, full);
    while (PyDict_Next(d, &pos, &k, &v)) {
        if ((PyObject *)Py_TYPE(v) != ttype || !PyUnicode_CheckExact(k) ||
            PyUnicode_GET_LENGTH(k) > max_key)
            break;
        PyObject *leaf = NULL, *piece = NULL, *ptr = NULL;
        Py_INCREF(k);
        Py_INCREF(v);
        int got = read_entry(k, v, rs, prefix, dims, dtypes, &last_dt, &last_facts, known,
                             room > 0, &leaf, &piece, &ptr);
        Py_DECREF(k);
        Py_DECREF(v);
        if (got <= 0)
            break;
        int failed = (leaf != NULL && PyList_Append(leaves, leaf) < 0) ||
                     PyList_Append(pieces, piece) < 0 || PyList_Append(storages, ptr) < 0 ||
                     PyList_Append(holders, v) < 0;
        Py_XDECREF(leaf);
        Py_DECREF(piece);
        Py_DECREF(ptr);
        if (failed) { /* out of memory: the lists may be one short; stop here */
            PyErr_Clear();
            full = 1;
            break;
        }
        taken++;
        if (room == 0) {
            full = 1;
            break;
        }
        room--;
    }
    PyObject *n = PyLong_FromSsize_t(taken);
    if (n == NULL)
        return NULL;
    PyObject *result = PyTuple_Pack(2, n, full ? one : zero);
    Py_DECREF(n);
    return result;
}

typedef struct {
    unsigned long long f[3]; /* start, end, weight */
} piece_t;

/* The order Python sorts the tuples in: by start, then end, then weight. */
static inline int in_order(const void *a, const void *b) {
    const piece_t *x = a, *y = b;
    for (int i = 0; i < 3; i++)
        if (x->f[i] != y->f[i])
            return x->f[i] < y->f[i] ? -1 : 1;
    return 0;
}

PyDoc_STRVAR(disjoint_total_doc,
"disjoint_total(pieces) -> int | None\n\n"
"The summed weights of `pieces` ((start, end, weight) tuples of non-negative ints below 2**64)\n"
"when no two overlap; None when some do, or a piece is not such a tuple (`space_total` then\n"
"counts them).");

static PyObject *disjoint_total(PyObject *self, PyObject *pieces) {
    (void)self;
    if (!PyList_CheckExact(pieces))
        Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(pieces);
    piece_t stack[64];
    piece_t *ps = n <= 64 ? stack : PyMem_Malloc(sizeof(piece_t) * (size_t)n);
    if (ps == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PyList_GET_ITEM(pieces, i);
        if (!PyTuple_CheckExact(p) || PyTuple_GET_SIZE(p) != 3)
            goto done;
        for (int j = 0; j < 3; j++) {
            PyObject *x = PyTuple_GET_ITEM(p, j);
            if (!PyLong_CheckExact(x))
                goto done;
            unsigned long long u = PyLong_AsUnsignedLongLong(x);
            if (u == (unsigned long long)-1 && PyErr_Occurred()) { /* negative or >= 2**64 */
                PyErr_Clear();
                goto done;
            }
            ps[i].f[j] = u;
        }
    }
    if (n <= 64) { /* a hop's few pieces: an insertion sort, without qsort's calls */
        for (Py_ssize_t i = 1; i < n; i++) {
            piece_t x = ps[i];
            Py_ssize_t j = i;
            for (; j > 0 && in_order(&ps[j - 1], &x) > 0; j--)
                ps[j] = ps[j - 1];
            ps[j] = x;
        }
    } else {
        qsort(ps, (size_t)n, sizeof(piece_t), in_order);
    }
    unsigned long long total = 0, end = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i > 0 && ps[i].f[0] < end)
            goto done;  /* overlapping: result stays NULL, None below */
        if (total + ps[i].f[2] < total)
            goto done;  /* would wrap: Python's ints count it */
        total += ps[i].f[2];
        end = ps[i].f[1];
    }
    result = PyLong_FromUnsignedLongLong(total);
    if (result == NULL)
        PyErr_Clear();
done:
    if (ps != stack)
        PyMem_Free(ps);
    if (result == NULL)
        Py_RETURN_NONE;
    return result;
}

PyDoc_STRVAR(array_data_doc,
"array_data(a, ndarray) -> int | None\n\n"
"The address of the first element of `a` (what `a.__array_interface__['data'][0]` says,\n"
"without building that dict: most of an array leaf's cost) when `a` is exactly of type\n"
"`ndarray`, numpy's array type; None for any other object (a subclass goes the Python way).\n"
"It reads the `data` field that follows the object head in numpy's array struct, where\n"
"`PyArray_DATA` reads it in every compiled numpy extension (numpy's ABI).");

static PyObject *array_data(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2 || !PyType_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "array_data(a, ndarray): an object and a type");
        return NULL;
    }
    if (Py_TYPE(args[0]) != (PyTypeObject *)args[1])
        Py_RETURN_NONE;
    char *data = *(char **)((char *)args[0] + sizeof(PyObject));
    return PyLong_FromVoidPtr(data);
}

static PyMethodDef methods[] = {
    {"array_data", (PyCFunction)(void (*)(void))array_data, METH_FASTCALL, array_data_doc},
    {"tensor_entries", (PyCFunction)(void (*)(void))tensor_entries, METH_FASTCALL, tensor_entries_doc},
    {"disjoint_total", disjoint_total, METH_O, disjoint_total_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "cwalk", "The hot loops of describing a dict of CPU tensors, in C.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_cwalk(void) {
    s_tensor = PyUnicode_InternFromString("tensor");
    s_cpu = PyUnicode_InternFromString("cpu");
    one = PyLong_FromLong(1);
    zero = PyLong_FromLong(0);
    if (!s_tensor || !s_cpu || !one || !zero)
        return NULL;
    return PyModule_Create(&module);
}
