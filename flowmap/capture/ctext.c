/* The C twins of text_identity.strings_of and TextKeys: which strings and floats a hop
 * carries, and their ids.
 *
 * Every hop of text walks its payload for the objects whose identity tells a relay from
 * a maker (flowmap/capture/text_identity.py), and keys what it found; in Python the walk
 * costs 4-7 us a hop and the keys as much again, half of a hop's whole cost in the
 * built-in trainer. The same steps here: only exact str, float, list, tuple and dict are
 * entered, a dataclass through the instance-dict descriptor text_identity looks up once
 * per class, and no code of the program runs. The one call back into Python is
 * text_identity's look-up of a class not met before, so every object on the walk's stack
 * is held while it waits there.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

/* text_identity's bounds, the same figures (a unit test compares them) */
#define MAX_STRINGS 128
#define PER_CONTAINER 64
#define MAX_NODES 256
#define MAX_DEPTH 4
#define MIN_CHARS 2
#define MAX_STRING_CHARS (1 << 20)
#define MAX_SHARED_LIST (1 << 16)
#define SHARED_WINDOW 8

static PyObject *records = NULL;      /* class -> descriptor or None (text_identity._RECORDS) */
static PyObject *record_dict = NULL;  /* text_identity._record_dict: a class not met before */

typedef struct {
    PyObject *obj;  /* held */
    int depth;
} Item;

typedef struct {
    Item *items;
    Py_ssize_t n, cap;
} Stack;

static int push(Stack *s, PyObject *obj, int depth) {
    if (s->n == s->cap) {
        Py_ssize_t cap = s->cap ? s->cap * 2 : 64;
        Item *items = PyMem_Realloc(s->items, (size_t)cap * sizeof(Item));
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        s->items = items;
        s->cap = cap;
    }
    Py_INCREF(obj);
    s->items[s->n].obj = obj;
    s->items[s->n].depth = depth;
    s->n++;
    return 0;
}

static void clear(Stack *s) {
    while (s->n)
        Py_DECREF(s->items[--s->n].obj);
    PyMem_Free(s->items);
}

static int is_interned(PyObject *v) {
    return PyUnicode_CheckExact(v) && PyUnicode_CHECK_INTERNED(v);
}

/* text_identity._shared: one float or string object twice, or an interned string, among
 * the first `SHARED_WINDOW` items of a list or tuple */
static int shared(PyObject *seq) {
    Py_ssize_t n = Py_SIZE(seq) < SHARED_WINDOW ? Py_SIZE(seq) : SHARED_WINDOW;
    PyObject **items = PyList_CheckExact(seq) ? ((PyListObject *)seq)->ob_item
                                              : ((PyTupleObject *)seq)->ob_item;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = items[i];
        if (PyFloat_CheckExact(v) || PyUnicode_CheckExact(v)) {
            if (is_interned(v))
                return 1;
            for (Py_ssize_t j = 0; j < i; j++)
                if (items[j] == v)
                    return 1;
        }
    }
    return 0;
}

/* text_identity._ints: a non-empty head of exact ints */
static int all_ints(PyObject **head, Py_ssize_t n) {
    if (n == 0)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (!PyLong_CheckExact(head[i]))
            return 0;
    return 1;
}

static int push_values(Stack *s, PyObject *d, int depth) {
    PyObject *vals[MAX_NODES];
    Py_ssize_t pos = 0, n = 0;
    PyObject *key, *value;
    while (n < MAX_NODES && PyDict_Next(d, &pos, &key, &value))
        vals[n++] = value;
    for (Py_ssize_t i = n - 1; i >= 0; i--)
        if (push(s, vals[i], depth) < 0)
            return -1;
    return 0;
}

/* the instance dict of a dataclass (new reference), None where `obj`'s class has none */
static PyObject *record_fields(PyObject *obj) {
    PyObject *t = (PyObject *)Py_TYPE(obj);
    PyObject *getter = PyDict_GetItemWithError(records, t);
    if (getter != NULL) {
        Py_INCREF(getter);
    } else {
        if (PyErr_Occurred())
            return NULL;
        getter = PyObject_CallOneArg(record_dict, t);
        if (getter == NULL)
            return NULL;
    }
    PyObject *fields = Py_None;
    Py_INCREF(fields);
    descrgetfunc get = Py_TYPE(getter)->tp_descr_get;
    if (getter != Py_None && get != NULL) {
        Py_DECREF(fields);
        fields = get(getter, obj, t);
    }
    Py_DECREF(getter);
    return fields;
}

static int append(PyObject *found, PyObject *v) {
    return PyList_Append(found, v);
}

static PyObject *walk(PyObject *payload) {
    PyObject *found = PyList_New(0);
    if (found == NULL)
        return NULL;
    Stack s = {NULL, 0, 0};
    if (push(&s, payload, 0) < 0)
        goto fail;
    int nodes = 0;
    while (s.n && nodes < MAX_NODES) {
        Item it = s.items[--s.n];
        PyObject *obj = it.obj;  /* held: released at the end of this round */
        int err = 0, stop = 0;
        nodes++;
        if (PyFloat_CheckExact(obj) ||
            (PyUnicode_CheckExact(obj) && PyUnicode_GET_LENGTH(obj) >= MIN_CHARS &&
             PyUnicode_GET_LENGTH(obj) <= MAX_STRING_CHARS && !is_interned(obj))) {
            err = append(found, obj);
            stop = PyList_GET_SIZE(found) >= MAX_STRINGS;
        } else if (PyUnicode_CheckExact(obj)) {
            /* a string too short, too long or interned: no one's */
        } else if (it.depth < MAX_DEPTH) {
            int below = it.depth + 1;
            int is_list = PyList_CheckExact(obj);
            if (is_list || PyTuple_CheckExact(obj)) {
                PyObject *head[PER_CONTAINER];
                Py_ssize_t len = Py_SIZE(obj);
                Py_ssize_t n = len < PER_CONTAINER ? len : PER_CONTAINER;
                for (Py_ssize_t i = 0; i < n; i++)
                    head[i] = is_list ? PyList_GET_ITEM(obj, i) : PyTuple_GET_ITEM(obj, i);
                if (shared(obj) || (is_list && all_ints(head, n))) {
                    if (is_list && len <= MAX_SHARED_LIST) {  /* the list, not its elements */
                        err = append(found, obj);
                        stop = PyList_GET_SIZE(found) >= MAX_STRINGS;
                    }
                } else {
                    for (Py_ssize_t i = n - 1; i >= 0 && !err; i--)
                        err = push(&s, head[i], below);
                }
            } else if (PyDict_CheckExact(obj)) {
                err = push_values(&s, obj, below);
            } else {  /* a dataclass's fields: a trajectory's score set on it */
                PyObject *fields = record_fields(obj);
                if (fields == NULL) {
                    err = -1;
                } else {
                    if (PyDict_CheckExact(fields))
                        err = push_values(&s, fields, below);
                    Py_DECREF(fields);
                }
            }
        }
        Py_DECREF(obj);
        if (err < 0)
            goto fail;
        if (stop)
            break;
    }
    clear(&s);
    return found;
fail:
    clear(&s);
    Py_DECREF(found);
    return NULL;
}

static PyObject *strings_of(PyObject *self, PyObject *payload) {
    (void)self;
    if (records == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "ctext.configure was not called");
        return NULL;
    }
    if (PyList_CheckExact(payload) && PyList_GET_SIZE(payload) &&
        PyUnicode_CheckExact(PyList_GET_ITEM(payload, 0))) {  /* the common text hop */
        Py_ssize_t len = PyList_GET_SIZE(payload);
        Py_ssize_t n = len < PER_CONTAINER ? len : PER_CONTAINER;
        PyObject *head[PER_CONTAINER];
        Py_ssize_t kept = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *v = PyList_GET_ITEM(payload, i);
            if (PyUnicode_CheckExact(v) && PyUnicode_GET_LENGTH(v) >= MIN_CHARS &&
                PyUnicode_GET_LENGTH(v) <= MAX_STRING_CHARS)
                head[kept++] = v;
        }
        if (kept == n) {
            if (!shared(payload)) {
                PyObject *found = PyList_New(kept);
                if (found == NULL)
                    return NULL;
                for (Py_ssize_t i = 0; i < kept; i++) {
                    Py_INCREF(head[i]);
                    PyList_SET_ITEM(found, i, head[i]);
                }
                return found;
            }
            PyObject *found = PyList_New(len <= MAX_SHARED_LIST ? 1 : 0);
            if (found != NULL && len <= MAX_SHARED_LIST) {
                Py_INCREF(payload);
                PyList_SET_ITEM(found, 0, payload);
            }
            return found;
        }
    }
    return walk(payload);
}

static PyObject *configure(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *r, *f;
    if (!PyArg_ParseTuple(args, "O!O:configure", &PyDict_Type, &r, &f))
        return NULL;
    Py_INCREF(r);
    Py_INCREF(f);
    Py_XSETREF(records, r);
    Py_XSETREF(record_dict, f);
    Py_RETURN_NONE;
}

static PyObject *bounds(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return Py_BuildValue("{sisisisisisisisi}", "MAX_STRINGS", MAX_STRINGS, "PER_CONTAINER",
                         PER_CONTAINER, "MAX_NODES", MAX_NODES, "MAX_DEPTH", MAX_DEPTH,
                         "MIN_CHARS", MIN_CHARS, "MAX_STRING_CHARS", MAX_STRING_CHARS,
                         "MAX_SHARED_LIST", MAX_SHARED_LIST, "SHARED_WINDOW", SHARED_WINDOW);
}

/* text_identity.TextKeys, the same ids: each object met is held (so no other object can
 * take its address) and keyed by its address, the oldest let go past a count or a weight */
typedef struct {
    PyObject_HEAD
    PyObject *held;   /* dict: address -> id */
    PyObject **ring;  /* the held objects, oldest at `head` */
    Py_ssize_t head, n, cap;
    long long chars, next_id, max_held, max_chars;
} Keys;

static long long weight(PyObject *v) {  /* text_identity._weight */
    if (PyUnicode_CheckExact(v))
        return (long long)PyUnicode_GET_LENGTH(v);
    if (PyList_CheckExact(v))
        return 36LL * (long long)PyList_GET_SIZE(v);
    return 1;
}

static int hold(Keys *k, PyObject *v) {
    if (k->n == k->cap) {
        Py_ssize_t cap = k->cap ? k->cap * 2 : 256;
        PyObject **ring = PyMem_Malloc((size_t)cap * sizeof(PyObject *));
        if (ring == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t i = 0; i < k->n; i++)
            ring[i] = k->ring[(k->head + i) % k->cap];
        PyMem_Free(k->ring);
        k->ring = ring;
        k->head = 0;
        k->cap = cap;
    }
    Py_INCREF(v);
    k->ring[(k->head + k->n) % k->cap] = v;
    k->n++;
    k->chars += weight(v);
    return 0;
}

static int let_go_oldest(Keys *k) {
    PyObject *v = k->ring[k->head];
    k->head = (k->head + 1) % k->cap;
    k->n--;
    k->chars -= weight(v);
    PyObject *at = PyLong_FromVoidPtr(v);
    int err = at == NULL ? -1 : PyDict_DelItem(k->held, at);
    Py_XDECREF(at);
    Py_DECREF(v);  /* last: the table is whole again if freeing it runs code */
    return err;
}

static PyObject *Keys_keys(Keys *k, PyObject *strings) {
    PyObject *seq = PySequence_Fast(strings, "keys() takes a list");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *out = PyList_New(n);
    if (out == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *at = PyLong_FromVoidPtr(v);
        if (at == NULL)
            goto fail;
        PyObject *id = PyDict_GetItemWithError(k->held, at);  /* held: no other object there */
        if (id != NULL) {
            Py_INCREF(id);
        } else if (PyErr_Occurred() || (id = PyLong_FromLongLong(k->next_id)) == NULL ||
                   PyDict_SetItem(k->held, at, id) < 0 || hold(k, v) < 0) {
            Py_XDECREF(id);
            Py_DECREF(at);
            goto fail;
        } else {
            k->next_id++;
        }
        Py_DECREF(at);
        PyList_SET_ITEM(out, i, id);
    }
    while (k->n && (k->n > k->max_held || k->chars > k->max_chars))  /* let the oldest go */
        if (let_go_oldest(k) < 0)
            goto fail;
    Py_DECREF(seq);
    return out;
fail:
    Py_DECREF(seq);
    Py_XDECREF(out);
    return NULL;
}

static int Keys_init(Keys *k, PyObject *args, PyObject *kwds) {
    long long max_held, max_chars;
    static char *names[] = {"max_held", "max_chars", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "LL:Keys", names, &max_held, &max_chars))
        return -1;
    if (k->held == NULL && (k->held = PyDict_New()) == NULL)
        return -1;
    k->max_held = max_held;
    k->max_chars = max_chars;
    k->next_id = k->next_id ? k->next_id : 1;
    return 0;
}

static int Keys_traverse(Keys *k, visitproc visit, void *arg) {
    Py_VISIT(k->held);
    for (Py_ssize_t i = 0; i < k->n; i++)
        Py_VISIT(k->ring[(k->head + i) % k->cap]);
    return 0;
}

static int Keys_clear(Keys *k) {
    Py_CLEAR(k->held);
    while (k->n) {
        PyObject *v = k->ring[k->head];
        k->head = (k->head + 1) % k->cap;
        k->n--;
        Py_DECREF(v);
    }
    k->chars = 0;
    return 0;
}

static void Keys_dealloc(Keys *k) {
    PyObject_GC_UnTrack(k);
    Keys_clear(k);
    PyMem_Free(k->ring);
    Py_TYPE(k)->tp_free((PyObject *)k);
}

static PyMethodDef Keys_methods[] = {
    {"keys", (PyCFunction)Keys_keys, METH_O,
     "keys(strings) -> list[int]: one id per object; one met before and still held keeps it."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Keys_members[] = {
    {"held", T_OBJECT, offsetof(Keys, held), READONLY, "address -> id, of the objects held"},
    {"chars", T_LONGLONG, offsetof(Keys, chars), READONLY, "what the held objects weigh"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject KeysType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "flowmap.capture.ctext.Keys",
    .tp_basicsize = sizeof(Keys),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "text_identity.TextKeys, in C.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Keys_init,
    .tp_dealloc = (destructor)Keys_dealloc,
    .tp_traverse = (traverseproc)Keys_traverse,
    .tp_clear = (inquiry)Keys_clear,
    .tp_methods = Keys_methods,
    .tp_members = Keys_members,
};

static PyMethodDef methods[] = {
    {"strings_of", strings_of, METH_O,
     "strings_of(payload) -> list: text_identity.strings_of, in C."},
    {"configure", configure, METH_VARARGS,
     "configure(records, record_dict): the per-class descriptor cache and its filler."},
    {"bounds", bounds, METH_NOARGS, "bounds() -> dict: the walk's bounds, as compiled."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ctext", "Which strings and floats a hop carries, in C.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_ctext(void) {
    if (PyType_Ready(&KeysType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&KeysType);
    if (PyModule_AddObject(m, "Keys", (PyObject *)&KeysType) < 0) {
        Py_DECREF(&KeysType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
