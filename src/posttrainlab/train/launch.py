"""What an accelerate config asks for, and what it runs as on this machine (docs/multi-gpu.md).

    python -m posttrainlab.train.launch configs/accelerate/*.yaml
    python -m posttrainlab.train.launch configs/accelerate/deepspeed_zero3.yaml --num_processes 2 --mixed_precision no

A config is read by accelerate's own launcher code: ``accelerate launch``'s parser, its ``_validate_launch_command``
(which merges the file with the flags and picks the launcher) and the environment that launcher hands each
process (``ACCELERATE_USE_FSDP``, ``ACCELERATE_USE_DEEPSPEED`` ...). So "asks for" is what ``accelerate launch
--config_file FILE`` would start. What the processes then *run as* is decided inside each of them by accelerate's
``AcceleratorState``; the trainers set ``use_cpu`` on a machine without a GPU (``common.default_arguments``), and
there (measured with accelerate 1.15, DeepSpeed 0.19, 2 processes, the tiny model):

- a DDP config (``MULTI_GPU``) runs as DDP over gloo on the CPU (``ddp_cpu.yaml`` asks for just that);
- an FSDP config **falls back** to DDP over gloo: accelerate enters FSDP only on GPUs, so nothing is sharded
  and each process holds the whole model (the same losses as ``ddp_cpu.yaml``, and DDP's reducer warnings);
- a DeepSpeed config runs ZeRO on DeepSpeed's CPU accelerator over gloo, except with ``mixed_precision: bf16``:
  without a GPU the trainers' ``bf16`` is off, and transformers refuses the mismatch with DeepSpeed's
  ``bf16.enabled`` (``--mixed_precision no`` runs it); without deepspeed installed, ``accelerate launch`` stops.

The command prints one line per config and exits 0 when each would run as asked here, 1 when any would fall back
or stop, 2 when a file is not an accelerate config (or names an option accelerate does not have: the launcher
would silently ignore it). Every training run under ``accelerate launch`` prints the same kind of line from the
inside (``report_launch``, called by ``common.run_trainer``): what its processes actually run, or what they fell
back from. What a launched process does around its training lives here too: ``skip_cpu_shm_build`` before it (no
DeepSpeed op compiled that CPU training never uses), ``leave_process_group`` after it; and whether training runs
under bf16 autocast here (``use_bf16``, from ``OptimConfig.bf16``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from posttrainlab.errors import BadInput

AS_ASKED, FALLS_BACK, STOPS = "runs as asked", "falls back", "stops"
#: why an FSDP config runs as DDP without a GPU (accelerate's AcceleratorState enters FSDP for GPU types only)
FSDP_NEEDS_GPU = "accelerate runs FSDP only on GPUs, so nothing is sharded and each process holds the whole model"
NO_DEEPSPEED = "DeepSpeed is not installed (pip install deepspeed)"
BF16_CLASH = (
    "mixed_precision bf16: the trainers turn bf16 on only on a GPU that has it, and transformers refuses the "
    "mismatch with DeepSpeed's bf16.enabled; pass --mixed_precision no"
)
#: a MULTI_CPU config without an mpirun hostfile: accelerate's simple launcher starts one process
MULTI_CPU = "DDP on CPUs (MULTI_CPU)"
MULTI_CPU_ONE = (
    "accelerate starts one process for MULTI_CPU unless mpirun_hostfile is set; ddp_cpu.yaml's MULTI_GPU starts them"
)


@dataclass(frozen=True)
class Launch:
    """What ``accelerate launch --config_file FILE [flags]`` would start: the parallelism, how many processes,
    with which mixed precision, and whether the config keeps the processes on the CPU (``use_cpu``)."""

    config: str
    asks: str  # "DDP", "FSDP2", "DeepSpeed ZeRO-3", "one process" or the DistributedType's name
    processes: int
    mixed_precision: str
    use_cpu: bool


@dataclass(frozen=True)
class Plan:
    """A ``Launch`` and what its processes run as on a machine: the parallelism, the status, the reason."""

    launch: Launch
    runs: str  # e.g. "DDP over gloo on the CPU"; "" when the launch stops
    status: str  # AS_ASKED, FALLS_BACK or STOPS
    why: str = ""

    def line(self) -> str:
        """One line: what the config asks for, then what happens here."""
        n = self.launch.processes
        ask = f"{self.launch.config}: asks for {self.launch.asks} in {n} process{'es' * (n != 1)}; here it"
        if self.status == STOPS:
            return f"{ask} would not start: {self.why}"
        if self.status == FALLS_BACK:
            return f"{ask} FALLS BACK to {self.runs}: {self.why}"
        return f"{ask} runs as asked: {self.runs}" + (f" ({self.why})" if self.why else "")


@contextmanager
def _quiet(name: str):
    """accelerate's launcher logs a paragraph about defaults it filled in; the one-line answer replaces it."""
    log = logging.getLogger(name)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def read_launch(
    path: str | os.PathLike, num_processes: int | None = None, mixed_precision: str | None = None
) -> Launch:
    """The launch ``accelerate launch --config_file PATH [--num_processes N] [--mixed_precision P]`` would start,
    read with accelerate's own parser, checks and launcher environment; ``BadInput`` (one line) when ``path`` is
    not a valid accelerate config or names an fsdp_config / deepspeed_config option the launcher does not know."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import prepare_deepspeed_cmd_env, prepare_multi_gpu_env

    path = Path(path)
    if not path.is_file():
        raise BadInput(f"{path}: no such accelerate config")
    parser = launch_command_parser()
    argv = ["--config_file", str(path)]
    argv += ["--num_processes", str(num_processes)] if num_processes is not None else []
    argv += ["--mixed_precision", mixed_precision] if mixed_precision is not None else []
    try:
        with _quiet("accelerate.commands.launch"):
            args, defaults, mp_from_config = _validate_launch_command(parser.parse_args([*argv, "train.py"]))
    except (ValueError, TypeError, KeyError) as e:  # accelerate's refusals of a config's keys or values
        raise BadInput(f"{path}: not a valid accelerate config: {e}") from None
    known = {action.dest for action in parser._actions}
    for section, prefix in (("fsdp_config", "fsdp_"), ("deepspeed_config", "")):
        for key in getattr(defaults, section, None) or {}:
            if (key if key.startswith(prefix) else prefix + key) not in known:
                raise BadInput(f"{path}: {section}.{key}: not an option of accelerate launch (it would be ignored)")
    if args.use_deepspeed:
        fields = [*defaults.deepspeed_config, *(["mixed_precision"] if mp_from_config else [])]
        args.deepspeed_fields_from_accelerate_config = ",".join(fields)  # as accelerate's launch_command sets it
        env = prepare_deepspeed_cmd_env(args)[1]
    elif args.multi_gpu or args.use_fsdp:
        env = prepare_multi_gpu_env(args)
    else:
        env = {}
    n = int(args.num_processes or 1)
    kind = defaults.distributed_type.value
    if env:
        asks = asked(env, n)
    elif kind == "MULTI_CPU":
        asks = "DDP" if getattr(args, "mpirun_hostfile", None) else MULTI_CPU
    else:
        asks = "one process" if kind == "NO" else kind  # kind: a type this project does not launch (XLA ...)
    cpu = bool(getattr(args, "use_cpu", False) or args.cpu)
    return Launch(config=path.name, asks=asks, processes=n, mixed_precision=str(args.mixed_precision), use_cpu=cpu)


def asked(env: Mapping[str, str], processes: int) -> str:
    """The parallelism a launcher's environment ``env`` asks the processes for (``os.environ`` inside one)."""
    if env.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true":
        return f"DeepSpeed ZeRO-{env.get('ACCELERATE_DEEPSPEED_ZERO_STAGE', '?')}"
    if env.get("ACCELERATE_USE_FSDP", "false").lower() == "true":
        return f"FSDP{env.get('FSDP_VERSION', '1')}"
    return "DDP" if processes > 1 else "one process"


def decide(launch: Launch, gpus: int, bf16: bool, deepspeed: bool) -> Plan:
    """What ``launch`` runs as on a machine with ``gpus`` CUDA GPUs (``bf16``: they have it; ``deepspeed``: it is
    installed), as accelerate's ``AcceleratorState`` decides it with the trainers' ``use_cpu`` (module docstring)."""
    kind, n = launch.asks, launch.processes
    cpu = gpus == 0 or launch.use_cpu
    where = "over gloo on the CPU" if cpu else f"over nccl on {n} GPUs"
    if kind == MULTI_CPU:
        return Plan(launch, "one process", FALLS_BACK, MULTI_CPU_ONE)
    if not kind.startswith(("DDP", "FSDP", "DeepSpeed", "one process")):
        return Plan(launch, "", STOPS, f"posttrainlab's trainers are launched with DDP, FSDP or DeepSpeed, not {kind}")
    if kind.startswith("DeepSpeed") and not deepspeed:
        return Plan(launch, "", STOPS, NO_DEEPSPEED)
    if kind.startswith("DeepSpeed") and launch.mixed_precision == "bf16" and (cpu or not bf16):
        return Plan(launch, "", STOPS, BF16_CLASH)
    if not cpu and n > gpus:
        return Plan(launch, "", STOPS, f"{n} processes for {gpus} GPU(s): pass --num_processes {gpus}")
    if kind == "one process":
        return Plan(launch, f"one process on the {'CPU' if cpu else 'GPU'}", AS_ASKED)
    if kind.startswith("FSDP") and cpu:
        return Plan(launch, f"DDP {where}", FALLS_BACK, FSDP_NEEDS_GPU)
    if kind.startswith("DeepSpeed") and cpu:
        return Plan(launch, f"{kind} {where}", AS_ASKED, "DeepSpeed's CPU accelerator")
    return Plan(launch, f"{kind} {where}", AS_ASKED, "no GPU here" if gpus == 0 and not launch.use_cpu else "")


def plan(
    path: str | os.PathLike,
    num_processes: int | None = None,
    mixed_precision: str | None = None,
    gpus: int | None = None,
    bf16: bool | None = None,
    deepspeed: bool | None = None,
) -> Plan:
    """``decide`` for the config at ``path`` on this machine, or on the one that ``gpus``, ``bf16`` (the GPUs have
    it) and ``deepspeed`` (it is installed) describe."""
    import importlib.util

    import torch

    launch = read_launch(path, num_processes, mixed_precision)
    gpus = torch.cuda.device_count() if gpus is None else gpus
    if bf16 is None:
        bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    deepspeed = importlib.util.find_spec("deepspeed") is not None if deepspeed is None else deepspeed
    return decide(launch, gpus, bf16, deepspeed)


def running(accelerator) -> str:
    """The parallelism a process runs: "DDP", "FSDP2", "DeepSpeed ZeRO-3" or "one process"."""
    kind = accelerator.distributed_type.value
    if kind == "DEEPSPEED":
        return f"DeepSpeed ZeRO-{accelerator.state.deepspeed_plugin.zero_stage}"
    if kind == "FSDP":
        return f"FSDP{getattr(accelerator.state.fsdp_plugin, 'fsdp_version', 1)}"
    return "DDP" if accelerator.num_processes > 1 else "one process"


def run_line(accelerator, method: str, env: Mapping[str, str] = os.environ) -> str | None:
    """The line a run under ``accelerate launch`` prints: its processes' parallelism, or the one they fell back
    from; ``None`` for a single process that asked for nothing else."""
    n = accelerator.num_processes
    wanted, got = asked(env, n), running(accelerator)
    if wanted == "one process" and got == "one process":
        return None
    cpu = accelerator.device.type == "cpu"
    procs = f"{n} process{'es' * (n != 1)}"
    where = f"over {accelerator.state.backend} on " + ("the CPU" if cpu else f"{n} GPU{'s' * (n != 1)}")
    if wanted.split()[0] != got.split()[0]:
        why = FSDP_NEEDS_GPU if wanted.startswith("FSDP") and cpu else "accelerate's choice on this machine"
        return f"{method}: the accelerate config asks for {wanted}, but this run is {got} {where} in {procs}: {why}"
    return f"{method}: {procs}, {got} {where}"


#: DeepSpeed's shared-memory all-reduce op on the CPU accelerator (deepspeed.ops.op_builder.cpu.ShareMemCommBuilder)
SHM_OP = "deepspeed_shm_comm"


def skip_cpu_shm_build(env: Mapping[str, str] = os.environ) -> bool:
    """In a DeepSpeed process without CUDA, mark DeepSpeed's shared-memory all-reduce op not buildable here; True
    when it did.

    DeepSpeed's comm backend compiles that C++ op on its first start on a machine (~85 s on 2 cores, then cached in
    ``~/.cache/torch_extensions`` for this venv), but only ``inference_all_reduce`` uses it: ZeRO training's
    collectives go through the process group (gloo on the CPU) either way, so the build buys a training run
    nothing. ``deepspeed.ops.__compatible_ops__`` is the table DeepSpeed reads before building it
    (``deepspeed.comm.torch.build_shm_op``); nothing else is changed, and GPU runs are left alone."""
    if env.get("ACCELERATE_USE_DEEPSPEED", "").lower() != "true":
        return False
    import importlib.util

    import torch

    if torch.cuda.is_available() or importlib.util.find_spec("deepspeed") is None:
        return False
    import deepspeed.ops

    deepspeed.ops.__compatible_ops__[SHM_OP] = False
    return True


def cpu_has_bf16(cpuinfo: str | Path = "/proc/cpuinfo") -> bool:
    """Whether this CPU computes bf16 natively (the ``avx512_bf16`` or ``amx_bf16`` flag; False where the flags
    cannot be read): there oneDNN's bf16 matrix products run ~2x fp32's, elsewhere they are emulated."""
    try:
        flags = Path(cpuinfo).read_text(encoding="utf-8", errors="replace").split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def use_bf16(setting: str) -> bool:
    """``OptimConfig.bf16`` on this machine: "gpu" is bf16 on a CUDA GPU that has it; "auto" that, and on a
    machine without a CUDA GPU a CPU with native bf16 (``cpu_has_bf16``); "never" is fp32 everywhere. Training then
    runs under bf16 autocast (transformers' ``bf16``); the weights and every saved model stay fp32."""
    import torch

    if setting == "never":
        return False
    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported()
    return setting == "auto" and cpu_has_bf16()


def report_launch(trainer, method: str) -> None:
    """Print ``run_line`` once (main process) for a built ``transformers.Trainer`` (nothing for a stand-in
    without an accelerator)."""
    accelerator = getattr(trainer, "accelerator", None)
    line = run_line(accelerator, method) if accelerator is not None else None
    if line and trainer.is_world_process_zero():
        print(line, flush=True)


def leave_process_group() -> None:
    """Under ``accelerate launch``: wait for every process, then tear gloo/NCCL down before the interpreter exits (a
    process that exits with the group alive can abort in C++ teardown, "terminate called without an active
    exception", failing a finished run)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    """``python -m posttrainlab.train.launch CONFIG... [--num_processes N] [--mixed_precision P]`` (docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m posttrainlab.train.launch",
        description="What each accelerate config asks for and what it runs as on this machine.",
    )
    parser.add_argument("configs", nargs="+", help="accelerate config files (configs/accelerate/*.yaml)")
    parser.add_argument("--num_processes", type=int, help="as accelerate launch's flag: replaces the config's")
    parser.add_argument("--mixed_precision", choices=["no", "fp16", "bf16", "fp8"], help="as accelerate launch's")
    ns = parser.parse_args(argv)
    worst = 0
    for config in ns.configs:
        try:
            p = plan(config, ns.num_processes, ns.mixed_precision)
        except BadInput as e:
            print(f"error: {e}", file=sys.stderr)
            worst = 2
            continue
        print(p.line(), flush=True)
        worst = max(worst, 0 if p.status == AS_ASKED else 1)
    return worst


if __name__ == "__main__":
    sys.exit(main())
