"""Where the lineage builders get a task's result: from the operator instance, never from XCom.

The provider asks for lineage in a fork of the task process, where talking to the API server is
unsafe; the operators keep their result on ``self`` so no lineage call needs the network.
"""

from __future__ import annotations

from typing import Any

__all__ = ["task_result"]


def task_result(operator: Any, task_instance: Any) -> Any:
    """What the task returned, as the operator kept it on itself (``_lineage_result``); else None.

    Kept on ``self``, never pulled from XCom: the provider calls the lineage method on the very
    operator instance that ran ``execute`` (or ``resume_execution``, after a deferral), but by
    default in a fork of the task process, which must not talk to the API server over the
    connection it inherited (a child terminated mid-request leaves it broken; under
    ``dag.test()``'s in-process supervisor an ``xcom_pull`` there hangs until the provider kills
    the child). Kept on ``self`` it also holds with ``do_xcom_push=False``. ``task_instance`` is
    the provider's argument, unused.
    """
    del task_instance
    return getattr(operator, "_lineage_result", None)
