"""The thread pool of resumable runs: many endpoint requests in flight, one writer, nothing paid for lost.

``posttrain eval judge`` and ``posttrain annotate`` send one request per row to a model endpoint and
append one line per finished row to a run file (:mod:`posttrainlab.data.runfile`). :func:`run_pool`
is the loop they share. Written by hand because its stopping rules are the project's:

- **One writer**: work runs on ``threads`` threads; results are handed to ``handle`` on the calling
  thread as they finish, so only it appends to the run file.
- **An endpoint fault stops the run** (:class:`~posttrainlab.errors.EndpointError`, the one class
  the sampling backend and the judge client raise): re-raised with the row and a message saying the
  finished rows are kept in the run file and the same command resumes.
- **No finished answer is lost**: on any stop but Ctrl-C (an endpoint fault, an abort raised by
  ``handle``, a kill-like exception from a progress hook), the results of requests that finished while
  the run was stopping go to ``salvage`` (which skips rows already written). Ctrl-C stops at once.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from posttrainlab.errors import EndpointError


def run_pool(
    pending: list[int],
    work: Callable[[int], Any],
    handle: Callable[[int, Any], None],
    salvage: Callable[[int, Any], None],
    *,
    threads: int,
    name: str,
    run_file: Path,
) -> None:
    """Run ``work(i)`` for every pending row on ``threads`` threads; ``handle`` each result as it finishes.

    ``name`` prefixes the threads' names; ``run_file`` is named in the message of an endpoint fault
    (module docstring). Any other exception from ``work`` or ``handle`` propagates as it is.
    """
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
    futures: dict[Future[Any], int] = {}
    interrupted = False
    try:
        futures = {pool.submit(work, i): i for i in pending}
        for fut in as_completed(futures):
            i = futures[fut]
            try:
                result = fut.result()
            except EndpointError as e:
                raise EndpointError(
                    f"row {i}: {e}; run stopped. Finished rows are kept in {run_file}: run the same command again "
                    "to resume once the endpoint answers",
                    e.transient,
                ) from None
            handle(i, result)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        pool.shutdown(wait=not interrupted, cancel_futures=True)
        if not interrupted:  # keep the work of requests that finished while the run was stopping
            for fut, i in futures.items():
                if fut.done() and not fut.cancelled() and fut.exception() is None:
                    salvage(i, fut.result())


__all__ = ["run_pool"]
