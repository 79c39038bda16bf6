/* SIGTERM handled again if Python never got to its handler (see sigterm.py).
 *
 * Python runs a signal's handler in the main thread at its next bytecode, or when a blocking
 * call in that thread is interrupted. A SIGTERM that lands just before the main thread goes to
 * sleep (a Pool worker entering `get` as the pool terminates it), or that the kernel hands to
 * another thread, interrupts nothing: the handler waits for a bytecode that never comes, and a
 * process that SIG_DFL would have ended at once sleeps for ever. So flowmap's handler is chained
 * behind this one, which lets Python note the signal as usual and arms a one-shot timer that
 * sends SIGTERM to the main thread again in REFIRE_NS; asleep, it is woken, and Python runs the
 * handler. The handler ends the process (or holds it for a send being recorded, when the next
 * refire comes); it also replaces this one when it restores SIG_DFL. Linux only (a timer that
 * targets one thread); elsewhere `arm` does nothing and says so.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifdef __linux__
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define REFIRE_NS 100000000L /* 0.1 s */

static struct sigaction chained; /* Python's own C handler of SIGTERM */
static timer_t timer;
static volatile sig_atomic_t have_timer = 0;
static int atfork_done = 0;

/* A timer that sends SIGTERM to the calling thread: the main thread (arm runs there, and a
 * forked child's only thread is its main thread). */
static void make_timer(void) {
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGTERM;
#ifdef sigev_notify_thread_id
    sev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
#else
    sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
#endif
    have_timer = timer_create(CLOCK_MONOTONIC, &sev, &timer) == 0;
}

static void on_sigterm(int sig, siginfo_t *info, void *context) {
    int saved = errno;
    if (chained.sa_flags & SA_SIGINFO) {
        if (chained.sa_sigaction != NULL)
            chained.sa_sigaction(sig, info, context);
    } else if (chained.sa_handler != SIG_DFL && chained.sa_handler != SIG_IGN) {
        chained.sa_handler(sig);
    }
    if (have_timer) { /* timer_settime is async-signal-safe */
        struct itimerspec when;
        memset(&when, 0, sizeof when);
        when.it_value.tv_nsec = REFIRE_NS;
        timer_settime(timer, 0, &when, NULL);
    }
    errno = saved;
}

static void in_forked_child(void) {
    /* timers are not inherited; the handler is: give the child its own timer */
    struct sigaction now;
    have_timer = 0;
    if (sigaction(SIGTERM, NULL, &now) == 0 && (now.sa_flags & SA_SIGINFO)
            && now.sa_sigaction == on_sigterm)
        make_timer();
}
#endif

PyDoc_STRVAR(arm_doc,
"arm() -> bool\n\n"
"Chain a refiring C handler in front of Python's SIGTERM handler, which must be installed\n"
"already (from the main thread). False where it cannot (not Linux, no timer, no handler).");

static PyObject *arm(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
#ifdef __linux__
    struct sigaction now, mine;
    if (sigaction(SIGTERM, NULL, &now) != 0)
        Py_RETURN_FALSE;
    if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_sigterm)
        return PyBool_FromLong(have_timer);
    if (now.sa_handler == SIG_DFL || now.sa_handler == SIG_IGN)
        Py_RETURN_FALSE;
    make_timer();
    if (!have_timer)
        Py_RETURN_FALSE;
    chained = now;
    memset(&mine, 0, sizeof mine);
    mine.sa_sigaction = on_sigterm;
    mine.sa_mask = now.sa_mask;
    /* no SA_RESTART, as Python: a blocking call must be interrupted to run the handler */
    mine.sa_flags = SA_SIGINFO | (now.sa_flags & SA_ONSTACK);
    if (sigaction(SIGTERM, &mine, NULL) != 0) {
        timer_delete(timer);
        have_timer = 0;
        Py_RETURN_FALSE;
    }
    if (!atfork_done && pthread_atfork(NULL, NULL, in_forked_child) == 0)
        atfork_done = 1;
    Py_RETURN_TRUE;
#else
    Py_RETURN_FALSE;
#endif
}

static PyMethodDef methods[] = {
    {"arm", arm, METH_NOARGS, arm_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "csigterm",
    "A refiring SIGTERM handler in front of Python's (see flowmap/capture/sigterm.py).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_csigterm(void) { return PyModule_Create(&module); }
