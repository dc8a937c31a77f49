"""The thread pool of resumable runs (data/pool.py): one writer, the one EndpointError stops it, nothing lost."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from posttrainlab import errors
from posttrainlab.data.pool import run_pool
from posttrainlab.generation import endpoint, openai_backend
from posttrainlab.runners import judge_client

RUN = Path("out/run.jsonl")


def test_every_row_is_handled_once_on_the_calling_thread():
    handled, threads = [], set()

    def handle(i, result):
        handled.append((i, result))
        threads.add(threading.current_thread().name)

    run_pool(list(range(20)), lambda i: i * i, handle, lambda i, r: None, threads=4, name="t", run_file=RUN)
    assert sorted(handled) == [(i, i * i) for i in range(20)]
    assert threads == {threading.current_thread().name}  # only the caller writes


def test_one_endpoint_error_class_for_the_judge_and_the_sampling_backend():
    assert judge_client.EndpointError is openai_backend.EndpointError is endpoint.EndpointError
    assert openai_backend.EndpointError is errors.EndpointError


@pytest.mark.parametrize("raised_by", [judge_client, openai_backend])
def test_an_endpoint_fault_stops_the_run_naming_the_row_and_the_run_file(raised_by):
    def work(i):
        if i == 3:
            raise raised_by.EndpointError("http://x/v1: HTTP 503: busy", True, 4)
        return i

    handled = []
    with pytest.raises(errors.EndpointError) as info:
        run_pool([3], work, lambda i, r: handled.append(i), lambda i, r: None, threads=1, name="t", run_file=RUN)
    message = str(info.value)
    assert message.startswith("row 3: http://x/v1: HTTP 503: busy (after 5 tries); run stopped.")
    assert f"Finished rows are kept in {RUN}" in message and "run the same command again" in message
    assert info.value.transient and handled == []


def test_results_that_finish_while_the_run_stops_are_salvaged():
    started, release = threading.Barrier(3, timeout=5), threading.Event()

    def work(i):
        started.wait()  # all three in flight, none left in the queue to be cancelled
        if i == 0:
            threading.Timer(0.05, release.set).start()
            raise errors.EndpointError("down")
        release.wait(5)  # still running when row 0 fails
        return f"answer {i}"

    def handle(i, result):
        raise AssertionError("row 0 fails first; nothing is handled")

    salvaged = {}
    with pytest.raises(errors.EndpointError, match="row 0: down; run stopped"):
        run_pool([0, 1, 2], work, handle, salvaged.__setitem__, threads=3, name="t", run_file=RUN)
    assert salvaged == {1: "answer 1", 2: "answer 2"}  # shutdown waited for them


def test_an_abort_from_handle_keeps_the_other_finished_results():
    class Aborted(Exception):
        pass

    both = threading.Barrier(2, timeout=5)

    def work(i):
        both.wait()
        return i

    def handle(i, result):
        raise Aborted

    salvaged = []
    with pytest.raises(Aborted):
        run_pool([0, 1], work, handle, lambda i, r: salvaged.append(i), threads=2, name="t", run_file=RUN)
    assert sorted(salvaged) == [0, 1]  # the caller's salvage skips rows it already wrote


def test_any_other_fault_of_work_propagates_as_it_is():
    def work(i):
        raise ValueError("a bug")

    with pytest.raises(ValueError, match="a bug"):
        run_pool([0], work, lambda i, r: None, lambda i, r: None, threads=1, name="t", run_file=RUN)


def test_ctrl_c_stops_at_once_without_salvage():
    def handle(i, result):
        raise KeyboardInterrupt

    salvaged = []
    with pytest.raises(KeyboardInterrupt):
        run_pool([0, 1], lambda i: i, handle, lambda i, r: salvaged.append(i), threads=2, name="t", run_file=RUN)
    assert salvaged == []
