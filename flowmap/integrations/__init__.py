"""Instrumentation of frameworks that move data between processes for the user.

`install_hooks()` arms patch-on-import hooks: when the traced program (or a
traced worker) imports a supported framework, its integration is installed.
Today: Ray (`flowmap[ray]`, see `flowmap.integrations.ray`), verl
(`flowmap.integrations.verl`, on top of Ray), and the transports
torch.distributed, multiprocessing and pyzmq (`flowmap.integrations.transports`,
each switchable with FLOWMAP_TRANSPORTS), and training steps counted from
`torch.optim` updates for a program that never calls `flowmap.step`
(`flowmap.integrations.optimizer_steps`).
"""

from __future__ import annotations

from types import ModuleType

from flowmap.capture import importhook


def install_hooks() -> None:
    """Instrument Ray and the transports when imported (now, if they already are)."""
    from flowmap.integrations import optimizer_steps, transports

    optimizer_steps.install()
    importhook.on_import("ray", _install_ray)
    importhook.on_import("verl.single_controller.ray.base", _install_verl)
    importhook.on_import("multiprocessing.process", _install_processes)
    importhook.on_import("torch.storage", _install_shared_moves)
    importhook.on_import("torch._tensor", _install_resize)
    transports.install_hooks()


def _install_shared_moves(module: ModuleType) -> None:
    from flowmap.integrations import shared_moves

    shared_moves.install(module)


def _install_resize(module: ModuleType) -> None:
    from flowmap.integrations import shared_moves

    shared_moves.install_resize(module)


def _install_processes(module: ModuleType) -> None:
    from flowmap.integrations import processes

    processes.install(module)


def _install_ray(module: ModuleType) -> None:
    from flowmap.integrations import ray as ray_integration

    ray_integration.install()


def _install_verl(module: ModuleType) -> None:
    from flowmap.integrations import verl as verl_integration

    verl_integration.install(module)
