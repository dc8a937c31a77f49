"""``python -m posttrainlab``: what ``accelerate launch -m posttrainlab train ...`` runs in each process.

Under a multi-process launcher (``WORLD_SIZE`` > 1) a finished command leaves with ``os._exit`` once its output is
flushed, skipping the interpreter's teardown: a process whose gloo/DeepSpeed worker threads are still joinable
when C++ static destructors run can abort there ("terminate called without an active exception", SIGABRT) after
the run has finished and saved, which fails the launch. Seen once in three fresh-clone suites on 2 cores
(tests/train/test_launch.py's ZeRO-3 run, rank 1) although training destroys its process group first
(``train.launch.leave_process_group``); pytorch/pytorch#190489 and #179291 describe the same teardown. Every
file the lab writes is closed before its command returns, so nothing is lost by skipping the teardown.
"""

import os
import sys

from posttrainlab.cli import main


def _exit_code(e: SystemExit) -> int:
    if e.code is None or isinstance(e.code, int):
        return e.code or 0
    print(e.code, file=sys.stderr)  # what SystemExit("message") prints on a normal exit
    return 1


def run() -> None:
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        main()
        return
    try:
        main()
        code = 0
    except SystemExit as e:
        code = _exit_code(e)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


run()
