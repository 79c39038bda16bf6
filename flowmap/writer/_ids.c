/* The C twin of the common case of `TraceWriter.storage_ids`: every storage of a hop already
 * has its id. It does exactly what the Python lines it stands in for do, and gives up (None)
 * wherever they would go on, so the Python code stays the reference: flowmap writes the same
 * trace without this module (it is built when a compiler is there, and FLOWMAP_PURE_PYTHON=1
 * turns it off). No exception escapes, nothing is kept between calls, no user code runs: the
 * keys are the tracer's storage keys (ints, or (int, str) tuples).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *comma;

PyDoc_STRVAR(known_ids_doc,
"known_ids(table, keys) -> str | None\n\n"
"`\",\".join(table[k] for k in keys)` when every key of the list `keys` is in the dict\n"
"`table` with a str value; None when one is not (`storage_ids` then numbers the new ones).");

static PyObject *known_ids(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2 || !PyDict_CheckExact(args[0]) || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "known_ids(table, keys): a dict and a list");
        return NULL;
    }
    PyObject *table = args[0], *keys = args[1];
    Py_ssize_t n = PyList_GET_SIZE(keys);
    PyObject *ids = PyList_New(n), *result = NULL;
    if (ids == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *id = PyDict_GetItemWithError(table, PyList_GET_ITEM(keys, i));
        if (id == NULL || !PyUnicode_CheckExact(id))
            goto done;  /* a new storage (or an error): Python numbers it */
        Py_INCREF(id);
        PyList_SET_ITEM(ids, i, id);
    }
    result = PyUnicode_Join(comma, ids);
done:
    Py_DECREF(ids);  /* the slots not reached are NULL, which list_dealloc skips */
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
    PyModuleDef_HEAD_INIT, "_ids", "The storage ids of a hop's line, in C.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__ids(void) {
    comma = PyUnicode_InternFromString(",");
    if (comma == NULL)
        return NULL;
    return PyModule_Create(&module);
}
