"""A request whose client has gone is dropped: watching the connection while its job waits or streams.

An abandoned request used to run to its end: a streaming ``max_tokens: 400`` whose client disconnected
after 1 s kept SmolLM2 busy, and the next 5-token request waited 28 s behind it. vLLM and ``transformers
serve`` abort such a request; so does this server. While a request's job is queued or generating, a
task waits for the ASGI ``http.disconnect`` message (uvicorn sends it when the connection closes; the body
has been read by then, so nothing else is waiting for messages), and when it comes the job's
:class:`~posttrainlab.serve.batcher.Ticket` is cancelled: a queued job never reaches a call, a running
one loses its rows at the next decode step (``serve.batcher``, ``serve.decode``).

- :func:`result_unless_gone`: a non-streaming request awaits its job or the disconnect, whichever comes
  first; :class:`ClientGone` when the client went first.
- :class:`JobEvents`: a streaming request's job as one queue of events: the tokens of each step, then
  :data:`DONE` when the job's future resolves, or :data:`GONE` when the client disconnects first.
"""

from __future__ import annotations

import asyncio
from typing import Any

from posttrainlab.serve.batcher import Batcher, SamplingParams, Ticket

#: Queue events of :class:`JobEvents` besides the tokens of a step.
DONE, GONE = "done", "gone"


class ClientGone(Exception):
    """The client disconnected before its answer was ready; its job was dropped."""


async def wait_disconnect(request) -> None:
    """Return once the client of ``request`` (a Starlette ``Request`` whose body has been read) has gone."""
    while True:
        message = await request.receive()
        if message.get("type") == "http.disconnect":
            return


async def result_unless_gone(request, ticket: Ticket) -> Any:
    """The job's result (or its exception), unless the client disconnects first: then ``ClientGone``."""
    watcher = asyncio.ensure_future(wait_disconnect(request))
    try:
        await asyncio.wait({ticket.future, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        ticket.cancel()
        raise
    finally:
        watcher.cancel()
    if not ticket.future.done():
        ticket.cancel()
        raise ClientGone
    return ticket.future.result()


class JobEvents:
    """A streaming request's job and the watch on its client, as one queue of events (module docstring).

    ``await next()`` gives a step's ``[(prompt, sample, token, ended), ...]``, then ``DONE`` or ``GONE``.
    ``close()`` stops the watch and drops the job if it is still running (a stream that ended early).
    """

    def __init__(self, batcher: Batcher, request, prompts: list, params: SamplingParams, ids: list[list[int]] | None):
        self.queue: asyncio.Queue = asyncio.Queue()
        self.ticket = batcher.submit(prompts, params, ids, listener=self.queue.put_nowait)
        self.ticket.future.add_done_callback(lambda _: self.queue.put_nowait(DONE))
        self.watcher = asyncio.ensure_future(wait_disconnect(request))
        self.watcher.add_done_callback(lambda t: None if t.cancelled() else self.queue.put_nowait(GONE))

    async def first(self) -> Any:
        """The first event: ``ClientGone`` when the client went first, the job's exception when it failed first."""
        try:
            event = await self.next()
            if event == GONE:
                raise ClientGone
            if event == DONE:
                self.result()
            return event
        except BaseException:
            self.close()
            raise

    async def next(self) -> Any:
        return await self.queue.get()

    def result(self) -> Any:
        """The job's completions, or its exception (once ``DONE`` has come)."""
        return self.ticket.future.result()

    def close(self) -> None:
        self.watcher.cancel()
        self.ticket.cancel()


__all__ = ["DONE", "GONE", "ClientGone", "JobEvents", "result_unless_gone", "wait_disconnect"]
