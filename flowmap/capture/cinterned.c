/* Whether a string is interned: a flag in the object's header, read without its characters.
 *
 * CPython interns the string constants of compiled code that look like names ("yes", "no",
 * "correct") and shares one object among every use: two stages that each write "yes" hand
 * on the very same object, so its identity says nothing of who made it
 * (flowmap/capture/text_identity.py). Python has no read of the flag; `sys.intern` sets it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *interned(PyObject *self, PyObject *s) {
    (void)self;
    if (PyUnicode_CheckExact(s) && PyUnicode_CHECK_INTERNED(s))
        Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}

PyDoc_STRVAR(interned_doc, "interned(s) -> bool: s is an exact str that CPython interned.");

static PyMethodDef methods[] = {
    {"interned", interned, METH_O, interned_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "cinterned", "Whether a string is interned, in C.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_cinterned(void) { return PyModule_Create(&module); }
