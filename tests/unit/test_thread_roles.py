"""Who a thread or an asyncio task is, for a queue hand-off with no owner set
(flowmap/integrations/transports/thread_queue.py): the program's threads and tasks by
their names, the standard library's and installed packages' by nobody's."""

from __future__ import annotations

import asyncio
import functools
import queue
import threading

from flowmap.integrations.transports.thread_queue import role_of, task_role


def rollout() -> None:
    pass


class Learner(threading.Thread):
    def run(self) -> None:
        pass


def test_a_programs_thread_is_its_given_name_else_its_targets_else_its_class():
    assert role_of(threading.Thread(target=rollout)) == "rollout"
    assert role_of(threading.Thread(target=functools.partial(rollout))) == "rollout"
    assert role_of(threading.Thread(target=rollout, name="actor/0")) == "actor/0"
    assert role_of(Learner()) == "Learner"


def test_a_thread_the_standard_library_runs_has_no_role():
    assert role_of(threading.Thread(target=queue.Queue().put, args=(1,))) is None
    assert role_of(threading.Thread()) is None  # no target, no run of its own


async def reward() -> str | None:
    return task_role(asyncio.current_task())


async def main() -> tuple[str | None, ...]:
    named = asyncio.create_task(reward(), name="scorer")
    return (await asyncio.create_task(reward()), await named, task_role(asyncio.current_task()))


def test_a_programs_task_is_its_given_name_else_its_coroutines_and_main_is_the_program():
    assert asyncio.run(main()) == ("reward", "scorer", None)


def test_a_wrapped_library_function_is_still_the_librarys():
    # GIVEN a Queue class whose put flowmap wrapped (as tracing leaves queue.Queue), and one
    # wrapped by the program's own decorator
    from types import SimpleNamespace

    from flowmap.integrations.transports.thread_queue import install_queue

    class Queue(queue.Queue):  # a subclass, so the real queue.Queue stays as it is
        pass

    install_queue(SimpleNamespace(__name__="test_thread_roles.queue", __file__="", Queue=Queue))
    assert Queue.put is not queue.Queue.put

    @functools.wraps(queue.Queue.get)
    def get(*args: object) -> object:
        return queue.Queue.get(*args)  # type: ignore[arg-type]

    # THEN a thread whose target is either wrapper is still the standard library's
    assert role_of(threading.Thread(target=Queue().put, args=(1,))) is None
    assert role_of(threading.Thread(target=get)) is None


def test_set_owner_in_a_task_names_that_task_and_in_main_the_process():
    from flowmap.capture import state
    from flowmap.capture.api import current_owner, set_owner

    seen: dict[str, str] = {}
    saved = state.default_owner, state.auto_owner

    async def producer(i: int) -> None:
        set_owner(f"rollout/{i}")
        await asyncio.sleep(0)
        seen[f"producer{i}"] = current_owner()

    async def main() -> None:
        set_owner("driver")  # the program's own coroutine: the process's owner
        await asyncio.gather(producer(0), producer(1))
        seen["main"] = current_owner()

    try:
        asyncio.run(main())
        assert seen == {"producer0": "rollout/0", "producer1": "rollout/1", "main": "driver"}
        assert state.default_owner == "driver"
    finally:
        state.default_owner, state.auto_owner = saved
