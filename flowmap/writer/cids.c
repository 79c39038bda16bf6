/* The C twin of the common case of `TraceWriter.storage_ids`: every storage of a hop already
 * has its id. It does exactly what the Python lines it stands in for do, and gives up (None)
 * wherever they would go on, so the Python code stays the reference: flowmap writes the same
 * trace without this module (it is built when a compiler is there, and FLOWMAP_PURE_PYTHON=1
 * turns it off). No exception escapes, nothing is kept between calls, no user code runs: the
 * keys are the tracer's storage keys (ints, or (int, str) tuples).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

PyDoc_STRVAR(known_ids_doc,
"known_ids(table, keys) -> str | None\n\n"
"`\",\".join(table[k][0] for k in keys)` when every key of the list `keys` is in the dict\n"
"`table` with a value `(id, ref)`, `id` an ASCII str (ids are digits) and `ref` a weak\n"
"reference to a live object; None when one is not (`storage_ids` then numbers the new ones).");

/* Whether `ref` is a weak reference whose object lives (the storage behind an id). */
static int alive(PyObject *ref) {
    if (!PyWeakref_CheckRefExact(ref))
        return 0;
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *obj = NULL;
    if (PyWeakref_GetRef(ref, &obj) <= 0) {
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(obj);
    return 1;
#else
    return PyWeakref_GET_OBJECT(ref) != Py_None;
#endif
}

static PyObject *known_ids(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2 || !PyDict_CheckExact(args[0]) || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "known_ids(table, keys): a dict and a list");
        return NULL;
    }
    PyObject *table = args[0], *keys = args[1];
    Py_ssize_t n = PyList_GET_SIZE(keys), length = n > 0 ? n - 1 : 0, got = 0;
    PyObject *stack[64], *result = NULL;
    PyObject **ids = n <= 64 ? stack : PyMem_Malloc(sizeof(PyObject *) * (size_t)n);
    if (ids == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    for (; got < n; got++) {
        PyObject *entry = PyDict_GetItemWithError(table, PyList_GET_ITEM(keys, got));
        /* a new storage, a freed one (its address may be another's now), or an error:
         * Python numbers it. Ids are ASCII digits. */
        if (entry == NULL || !PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 2)
            goto done;
        PyObject *id = PyTuple_GET_ITEM(entry, 0);
        if (!PyUnicode_CheckExact(id) || !PyUnicode_IS_ASCII(id) ||
            !alive(PyTuple_GET_ITEM(entry, 1)))
            goto done;
        Py_INCREF(id);  /* held: comparing a later key could free it from the table */
        ids[got] = id;
        length += PyUnicode_GET_LENGTH(id);
    }
    result = PyUnicode_New(length, 127);
    if (result == NULL)
        goto done;
    Py_UCS1 *out = PyUnicode_1BYTE_DATA(result);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i > 0)
            *out++ = ',';
        Py_ssize_t len = PyUnicode_GET_LENGTH(ids[i]);
        memcpy(out, PyUnicode_1BYTE_DATA(ids[i]), (size_t)len);
        out += len;
    }
done:
    for (Py_ssize_t i = 0; i < got; i++)
        Py_DECREF(ids[i]);
    if (ids != stack)
        PyMem_Free(ids);
    if (result == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return result;
}

static PyMethodDef methods[] = {
    {"known_ids", (PyCFunction)(void (*)(void))known_ids, METH_FASTCALL, known_ids_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "cids", "The storage ids of a hop's line, in C.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_cids(void) {
    return PyModule_Create(&module);
}
