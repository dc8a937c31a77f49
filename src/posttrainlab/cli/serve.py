"""``posttrain serve``: an OpenAI-compatible server for a local model or a program judge.

    posttrain serve --model runs/quickstart/sft/final --port 8000
    posttrain serve --judge arith --judge-noise 0.1 --port 8000
    posttrain eval judge --data-file F --model-name arith-judge --model-url http://127.0.0.1:8000/v1

A thin verb: check the flags, bind the socket (a busy port fails before a model loads), build the
backend, print the URL, hand over to ``posttrainlab.serve.app``. torch, FastAPI and uvicorn are
imported inside the verb, so ``posttrain --help`` stays fast.
"""

from __future__ import annotations

import typer

from posttrainlab.threads import check_threads, configure_threads

JUDGES = ("arith",)


def _backend(model: str | None, judge: str | None, judge_noise: float | None, seed: int, opts: dict):
    """``(backend, default served name)`` for ``--model`` or ``--judge``."""
    from posttrainlab.errors import PosttrainError, one_line

    if judge is not None:
        try:
            from posttrainlab.serve.program_judge import ArithProgramJudge
        except ImportError as e:
            raise PosttrainError(f"--judge arith: the program judge cannot be loaded ({one_line(e)})") from None
        return ArithProgramJudge(noise=0.0 if judge_noise is None else judge_noise, seed=seed), "arith-judge"
    assert model is not None
    from posttrainlab.generation.transformers_backend import TransformersBackend

    configure_threads(opts["threads"])
    backend = TransformersBackend.from_pretrained(
        model,
        batch_size=opts["max_batch_size"],
        progress=False,
        trust_remote_code=opts["trust_remote_code"],
        dtype=opts["dtype"],
    )
    return backend, model


def serve(
    model: str | None = typer.Option(None, "--model", help="A local Hugging Face model folder (or a Hub id)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on (loopback unless told otherwise)."),
    port: int = typer.Option(8000, "--port", help="Port to listen on (0: a free one, printed)."),
    api_key: str | None = typer.Option(
        None, "--api-key", envvar="POSTTRAIN_SERVE_API_KEY", help="Require 'Authorization: Bearer KEY'."
    ),
    served_model_name: str | None = typer.Option(
        None, "--served-model-name", help="The model name clients send (default: --model as given, or arith-judge)."
    ),
    judge: str | None = typer.Option(None, "--judge", help="Serve a program judge instead of a model: arith."),
    judge_noise: float | None = typer.Option(
        None, "--judge-noise", help="The program judge's noise level P in [0, 1] (0: exact)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the program judge, and of sampled requests without one."),
    max_batch_size: int = typer.Option(32, "--max-batch-size", help="Most prompts in one generate call."),
    batch_wait_ms: float = typer.Option(
        10.0, "--batch-wait-ms", help="How long to collect concurrent requests into one batch."
    ),
    dtype: str = typer.Option("float32", "--dtype", help="float32, bfloat16, float16 or auto."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Run the model repo's own code."),
    threads: int | None = typer.Option(None, "--threads", help="torch CPU threads."),
    access_log: bool = typer.Option(False, "--access-log/--no-access-log", help="Log every request."),
) -> None:
    """Serve a local model (or a program judge) behind an OpenAI-compatible API, batching concurrent requests."""
    from posttrainlab.errors import BadInput

    if (model is None) == (judge is None):
        raise BadInput("give --model DIR to serve a model, or --judge arith to serve a program judge (not both)")
    if judge is not None and judge not in JUDGES:
        raise BadInput(f"--judge {judge!r}: choose one of {', '.join(JUDGES)}")
    if judge_noise is not None:
        if judge is None:
            raise BadInput("--judge-noise applies to --judge only")
        if not 0 <= judge_noise <= 1:
            raise BadInput(f"--judge-noise {judge_noise}: must be in [0, 1]")
    if max_batch_size < 1:
        raise BadInput(f"--max-batch-size {max_batch_size}: must be at least 1")
    if batch_wait_ms < 0:
        raise BadInput(f"--batch-wait-ms {batch_wait_ms}: must be >= 0")
    check_threads(threads)
    if api_key is not None and not api_key.strip():
        raise BadInput("--api-key is empty")

    try:
        from posttrainlab.serve.app import bind, create_app, is_loopback, run_server, url_of
    except ImportError as e:
        from posttrainlab.errors import PosttrainError, one_line

        raise PosttrainError(
            f"posttrain serve needs fastapi and uvicorn: pip install -e '.[train]' ({one_line(e)})"
        ) from None

    sock = bind(host, port)
    try:
        opts = {"threads": threads, "max_batch_size": max_batch_size, "trust_remote_code": trust_remote_code}
        backend, default_name = _backend(model, judge, judge_noise, seed, {**opts, "dtype": dtype})
        name = served_model_name or default_name
        app = create_app(
            backend, name, api_key, max_batch_size=max_batch_size, batch_wait_ms=batch_wait_ms, seed=seed
        )  # fmt: skip
    except BaseException:
        sock.close()
        raise
    url = url_of(sock)
    print(f"serving {name!r} at {url} (OpenAI-compatible; batches of up to {max_batch_size} prompts, "
          f"{batch_wait_ms:g} ms wait; Ctrl-C stops)", flush=True)  # fmt: skip
    if not is_loopback(host) and api_key is None:
        print(f"warning: listening on {host} without --api-key: anyone who reaches this port can use it", flush=True)
    run_server(app, sock, log_level="info" if access_log else "warning", access_log=access_log)
    print("server stopped", flush=True)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
