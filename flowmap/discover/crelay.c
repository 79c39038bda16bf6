/* The watch's profile hook in front of its Python half, and its import quieting (see watch.py).
 *
 * Python 3.11 reports every call and return to a profile hook, C calls included. Nearly all
 * of them are of code the watch decided once to leave alone, so this relay answers those
 * itself and calls the Python hook only for code not decided yet and code it follows. The
 * decision is kept on the code object (its co_extra slot, tagged with the relay's own number),
 * so a look costs no hash of the code; the Python hook's cache stays the one record of what
 * was decided. `quiet_import` runs an `import` statement with the hook off, as the Python
 * wrapper did. Both are C callables for one more reason: a Python function pushed at every
 * event (or every import) makes CPython 3.11 map and unmap a frame-stack chunk again and
 * again where the program's stack sits at a chunk's end (docs/seam-maps.md).
 *
 * Nothing here raises into the program that the Python hook would not have raised.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <frameobject.h>

#if PY_VERSION_HEX >= 0x030C0000
#define GET_EXTRA PyUnstable_Code_GetExtra
#define SET_EXTRA PyUnstable_Code_SetExtra
#define REQUEST_INDEX PyUnstable_Eval_RequestCodeExtraIndex
#else
#define GET_EXTRA _PyCode_GetExtra
#define SET_EXTRA _PyCode_SetExtra
#define REQUEST_INDEX _PyEval_RequestCodeExtraIndex
#endif

static Py_ssize_t extra_index = -1;
static uintptr_t relays_made = 0;
static PyObject *s_call, *s_return;

/* Both types hold two objects, then their vectorcall: one traverse, clear and dealloc. */
typedef struct {
    PyObject_HEAD
    PyObject *first, *second;
    vectorcallfunc vectorcall;
} Held;

typedef struct {
    PyObject_HEAD
    PyObject *cache; /* the Python hook's decisions: code -> info, or None (left alone) */
    PyObject *hook;  /* the Python hook: hook(frame, event, arg) */
    vectorcallfunc vectorcall;
    void *skip_tag;  /* co_extra values: decided by this relay's watch, left alone / followed */
    void *follow_tag;
    int off;         /* the watch stopped: the next event takes the hook off this thread */
} Relay;

typedef struct {
    PyObject_HEAD
    PyObject *plain; /* the __import__ it stands in for */
    PyObject *relay; /* the profile function it takes off while importing */
    vectorcallfunc vectorcall;
} Quiet;

_Static_assert(offsetof(Relay, vectorcall) == offsetof(Held, vectorcall)
               && offsetof(Quiet, vectorcall) == offsetof(Held, vectorcall),
               "Relay and Quiet begin as Held does");

static void hold(PyObject *op, PyObject *first, PyObject *second, vectorcallfunc call) {
    Held *self = (Held *)op;
    Py_INCREF(first);
    Py_XSETREF(self->first, first);
    Py_INCREF(second);
    Py_XSETREF(self->second, second);
    self->vectorcall = call;
}

static int held_traverse(PyObject *op, visitproc visit, void *arg) {
    Py_VISIT(((Held *)op)->first);
    Py_VISIT(((Held *)op)->second);
    return 0;
}

static int held_clear(PyObject *op) {
    Py_CLEAR(((Held *)op)->first);
    Py_CLEAR(((Held *)op)->second);
    return 0;
}

static void held_dealloc(PyObject *op) {
    PyObject_GC_UnTrack(op);
    held_clear(op);
    Py_TYPE(op)->tp_free(op);
}

/* The slots both types fill alike. */
static int ready(PyTypeObject *type, const char *name, Py_ssize_t size, initproc init,
                 const char *doc) {
    type->tp_name = name;
    type->tp_basicsize = size;
    type->tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL;
    type->tp_doc = doc;
    type->tp_new = PyType_GenericNew;
    type->tp_init = init;
    type->tp_dealloc = held_dealloc;
    type->tp_traverse = held_traverse;
    type->tp_clear = held_clear;
    type->tp_call = PyVectorcall_Call;
    type->tp_vectorcall_offset = offsetof(Held, vectorcall);
    return PyType_Ready(type);
}

static void *tag_of(PyObject *code) {
    void *tag = NULL;
    if (GET_EXTRA(code, extra_index, &tag) < 0) {
        PyErr_Clear();
        return NULL;
    }
    return tag;
}

/* After the Python hook saw a call: keep its decision on the code. */
static void keep_decision(Relay *self, PyObject *code) {
    PyObject *info = PyDict_GetItemWithError(self->cache, code); /* borrowed */
    if (info == NULL) {
        PyErr_Clear(); /* not decided (the watch stopped), or a lookup that failed */
        return;
    }
    if (SET_EXTRA(code, extra_index, info == Py_None ? self->skip_tag : self->follow_tag) < 0)
        PyErr_Clear();
}

/* One event. The C events, and code left alone, cost a look at the code's tag and nothing
 * more; the Python hook runs for a call of code not decided yet, and for code it follows. */
static int on_event(Relay *self, PyFrameObject *frame, int what, PyObject *arg) {
    if (self->off) { /* the watch stopped: this thread's profile function goes too */
        PyEval_SetProfile(NULL, NULL);
        if (PyErr_Occurred())
            PyErr_Clear();
        return 0;
    }
    if (what != PyTrace_CALL && what != PyTrace_RETURN)
        return 0; /* c_call, c_return, c_exception: the watch follows Python code only */
    PyObject *code = (PyObject *)PyFrame_GetCode(frame);
    void *tag = tag_of(code);
    int ok = 0;
    if (what == PyTrace_CALL ? tag != self->skip_tag : tag == self->follow_tag) {
        PyObject *stack[3] = {(PyObject *)frame, what == PyTrace_CALL ? s_call : s_return,
                              arg != NULL ? arg : Py_None};
        PyObject *res = PyObject_Vectorcall(self->hook, stack, 3, NULL);
        if (res == NULL)
            ok = -1;
        else {
            Py_DECREF(res);
            if (what == PyTrace_CALL && tag != self->follow_tag)
                keep_decision(self, code);
        }
    } /* else: left alone, or a return of code never seen called while watched */
    Py_DECREF(code);
    return ok;
}

/* The profile function proper (PyEval_SetProfile), with no trampoline: Python's own copies
 * the frame's locals into a dict at every event, C calls included, before calling a hook. */
static int relay_trace(PyObject *op, PyFrameObject *frame, int what, PyObject *arg) {
    Py_INCREF(op); /* the hook may take the profile function, and its hold, off */
    int ok = on_event((Relay *)op, frame, what, arg);
    if (ok < 0) { /* as Python's trampoline does: the hook goes, its exception propagates */
        PyObject *exc_type, *exc, *tb;
        PyErr_Fetch(&exc_type, &exc, &tb);
        PyEval_SetProfile(NULL, NULL);
        if (PyErr_Occurred())
            PyErr_Clear();
        PyErr_Restore(exc_type, exc, tb);
    }
    Py_DECREF(op);
    return ok;
}

/* Called as a Python profile function: through `threading.setprofile` in a new thread, where
 * the event after this one takes the direct path. */
static PyObject *relay_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kw) {
    Relay *self = (Relay *)op;
    if (PyVectorcall_NARGS(nargsf) != 3 || kw != NULL || !PyFrame_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "a profile hook takes (frame, event, arg)");
        return NULL;
    }
    PyObject *event = args[1];
    int what = -1;
    if (event == s_call || (PyUnicode_Check(event) && PyUnicode_Compare(event, s_call) == 0))
        what = PyTrace_CALL;
    else if (event == s_return || (PyUnicode_Check(event) && PyUnicode_Compare(event, s_return) == 0))
        what = PyTrace_RETURN;
    Py_INCREF(op);
    PyThreadState *ts = PyThreadState_Get();
    if (!self->off && ts->c_profileobj == op && ts->c_profilefunc != relay_trace) {
        PyEval_SetProfile(relay_trace, op);
        if (PyErr_Occurred())
            PyErr_Clear();
    }
    int ok = on_event(self, (PyFrameObject *)args[0], what, args[2]);
    Py_DECREF(op);
    if (ok < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *relay_install(PyObject *op, PyObject *unused) {
    ((Relay *)op)->off = 0;
    PyEval_SetProfile(relay_trace, op);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef relay_methods[] = {
    {"install", relay_install, METH_NOARGS,
     "Make this the calling thread's profile function, called with no trampoline."},
    {NULL},
};

static int relay_init(PyObject *op, PyObject *args, PyObject *kwargs) {
    Relay *self = (Relay *)op;
    static char *names[] = {"cache", "hook", NULL};
    PyObject *cache, *hook;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O:Relay", names, &PyDict_Type, &cache,
                                     &hook))
        return -1;
    if (!PyCallable_Check(hook)) {
        PyErr_SetString(PyExc_TypeError, "hook must be callable");
        return -1;
    }
    hold(op, cache, hook, relay_call);
    relays_made += 1;
    self->skip_tag = (void *)(relays_made * 4 + 1);
    self->follow_tag = (void *)(relays_made * 4 + 2);
    self->off = 0;
    return 0;
}

static PyMemberDef relay_members[] = {
    {"off", T_INT, offsetof(Relay, off), 0,
     "Set once the watch stops: each thread's next event takes the hook off."},
    {NULL},
};

static PyTypeObject RelayType = {PyVarObject_HEAD_INIT(NULL, 0)};

static PyObject *quiet_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kw) {
    Quiet *self = (Quiet *)op;
    PyThreadState *ts = PyThreadState_Get();
    Relay *relay = (Relay *)self->relay;
    if (ts->c_profileobj != self->relay || relay->off)
        return PyObject_Vectorcall(self->plain, args, nargsf, kw);
    Py_tracefunc func = ts->c_profilefunc;
    Py_INCREF(self->relay);
    if (PyEval_SetProfile(NULL, NULL), PyErr_Occurred()) {
        PyErr_Clear();
    }
    PyObject *res = PyObject_Vectorcall(self->plain, args, nargsf, kw);
    if (!relay->off && ts->c_profilefunc == NULL) {
        PyObject *exc_type, *exc, *tb;
        PyErr_Fetch(&exc_type, &exc, &tb); /* an import that raised keeps its exception */
        PyEval_SetProfile(func, self->relay);
        if (PyErr_Occurred())
            PyErr_Clear();
        PyErr_Restore(exc_type, exc, tb);
    }
    Py_DECREF(self->relay);
    return res;
}

static int quiet_init(PyObject *op, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"plain", "relay", NULL};
    PyObject *plain, *relay;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!:QuietImport", names, &plain,
                                     &RelayType, &relay))
        return -1;
    hold(op, plain, relay, quiet_call);
    return 0;
}

static PyTypeObject QuietType = {PyVarObject_HEAD_INIT(NULL, 0)};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "crelay",
    "The watch's profile hook in front of its Python half (see watch.py).", -1, NULL,
};

PyMODINIT_FUNC PyInit_crelay(void) {
    RelayType.tp_members = relay_members;
    RelayType.tp_methods = relay_methods;
    if (ready(&RelayType, "flowmap.discover.crelay.Relay", sizeof(Relay), relay_init,
              "Relay(cache, hook): a profile function that calls hook only for code not "
              "decided in cache and code decided to follow.") < 0
            || ready(&QuietType, "flowmap.discover.crelay.QuietImport", sizeof(Quiet), quiet_init,
                     "QuietImport(plain, relay): __import__ run with relay off as the thread's "
                     "profile function, while it is on and not stopped.") < 0)
        return NULL;
    if (extra_index < 0)
        extra_index = REQUEST_INDEX(NULL);
    if (extra_index < 0) {
        PyErr_SetString(PyExc_ImportError, "no code extra index is free");
        return NULL;
    }
    s_call = PyUnicode_InternFromString("call");
    s_return = PyUnicode_InternFromString("return");
    if (!s_call || !s_return)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&RelayType);
    Py_INCREF(&QuietType);
    if (PyModule_AddObject(m, "Relay", (PyObject *)&RelayType) < 0
            || PyModule_AddObject(m, "QuietImport", (PyObject *)&QuietType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
