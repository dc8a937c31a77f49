"""``posttrain data convert|validate|stats|join``: step-level corpora on the command line.

Thin verbs over ``posttrainlab.data.formats`` (docs/formats.md). Every input is a local
``.jsonl``/``.json``/``.parquet`` file or an ``hf://owner/name[/CONFIG][:SPLIT]`` path, read as a
stream; every output (``.jsonl`` or ``.parquet``) is written atomically, so a conversion that meets a
bad row stops with exit 2, names the file and the row, and leaves nothing half-written.

    posttrain data convert sharp --span SHARP-Math-SPAN.jsonl --out SHARP-Math.jsonl
    posttrain data validate --format step SHARP-Math.jsonl
    posttrain data stats --format mc-value --json train.parquet
    posttrain data join --step SHARP-Math.jsonl --span SHARP-Math-SPAN.jsonl

``register(data_app)`` adds these verbs to the ``data`` group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from posttrainlab.cli.options import check_out_file, out_file
from posttrainlab.data.formats import FORMATS
from posttrainlab.errors import BadInput

#: the formats ``validate`` and ``stats`` know, made from ``posttrainlab.data.formats.FORMATS`` (the one list; the
#: CLI imports the registry anyway, through ``label.mc``): ``FormatName.math_shepherd.value == "math-shepherd"``
FormatName = Enum("FormatName", {name.replace("-", "_"): name for name in FORMATS}, type=str)


class MathShepherdTarget(str, Enum):
    step = "step"
    list = "list"
    ki = "ki"


class StepTarget(str, Enum):
    math_shepherd = "math-shepherd"
    processbench = "processbench"


class ProcessBenchTarget(str, Enum):
    step = "step"
    processbench = "processbench"


class McTarget(str, Enum):
    traces = "traces"
    rows = "rows"


convert_app = typer.Typer(
    help="Convert between step-level formats; output row i is input row i (mc-value traces aside).",
    no_args_is_help=True,
)

Out = Annotated[
    Path, typer.Option("--out", parser=out_file, help="Output file, .jsonl or .parquet (written atomically).")
]
Source = Annotated[
    str,
    typer.Argument(metavar="FILE", help="A .jsonl, .json or .parquet file, or hf://owner/name/CONFIG:SPLIT."),
]
FormatOption = Annotated[FormatName, typer.Option("--format", help="The format of FILE.")]
Overwrite = Annotated[
    bool, typer.Option("--overwrite", help="Replace an existing --out file (never one of the inputs).")
]


def _convert(
    source: str, out: Path, convert: Callable[[Iterable[dict]], Iterable[dict]], overwrite: bool, flag: str = "FILE"
) -> None:  # fmt: skip
    """Stream ``source`` through ``convert`` into ``out``; a bad row is ``BadInput``, nothing is written. ``out`` is
    never ``source``, and an existing ``out`` is replaced only with ``overwrite`` (``options.check_out_file``)."""
    from posttrainlab.data.formats.readers import iter_rows
    from posttrainlab.data.formats.schema import RowError
    from posttrainlab.data.formats.writers import write_rows

    check_out_file(out, overwrite, {flag: source})
    try:
        n = write_rows(out, convert(iter_rows(source)))
    except RowError as e:
        raise BadInput(f"{source}: row {e.index}: {e.reason} (nothing written to {out})") from None
    typer.echo(f"wrote {n} rows to {out}")


def _per_row(convert: Callable[[dict], dict]) -> Callable[[Iterable[dict]], Iterator[dict]]:
    from posttrainlab.data.formats.schema import map_rows

    return lambda rows: map_rows(rows, convert)


@convert_app.command("sharp")
def convert_sharp(
    span: Annotated[
        str, typer.Option("--span", help="SHARP span view: question, model_answer, hallucination_annotation.")
    ],
    out: Out,
    overwrite: Overwrite = False,
) -> None:
    """SHARP span view -> step view (the card): 0 where a <HAL> span touches a step; cut after the first 0."""
    from posttrainlab.data.formats.sharp import convert_span_rows

    _convert(span, out, convert_span_rows, overwrite, "--span")


@convert_app.command("math-shepherd")
def convert_math_shepherd(
    source: Source,
    to: Annotated[
        MathShepherdTarget,
        typer.Option("--to", help="step (cut at the first error), list (prompt/completions/labels) or ki (ки text)."),
    ],
    out: Out,
    overwrite: Overwrite = False,
) -> None:
    """Math-Shepherd rows (list form or ки text, read per row) -> step view, list form or ки text."""
    from posttrainlab.data.formats import math_shepherd as ms

    convert = {
        "step": ms.ms_to_step,
        "list": ms.as_list_form,
        "ki": lambda row: ms.to_ki(ms.as_list_form(row)),
    }
    _convert(source, out, _per_row(convert[to.value]), overwrite)


@convert_app.command("step")
def convert_step(
    source: Source,
    to: Annotated[StepTarget, typer.Option("--to", help="math-shepherd (list form) or processbench.")],
    out: Out,
    overwrite: Overwrite = False,
) -> None:
    """Step view -> Math-Shepherd list form or ProcessBench (both lossless)."""
    from posttrainlab.data.formats.math_shepherd import step_to_ms
    from posttrainlab.data.formats.processbench import step_to_pb

    _convert(source, out, _per_row(step_to_ms if to == StepTarget.math_shepherd else step_to_pb), overwrite)


@convert_app.command("processbench")
def convert_processbench(
    source: Source,
    out: Out,
    to: Annotated[ProcessBenchTarget, typer.Option("--to", help="step or processbench.")] = ProcessBenchTarget.step,
    neutral: Annotated[
        int, typer.Option("--neutral", min=0, max=1, help="Step label of a neutral (0) PRM800K rating.")
    ] = 1,
    overwrite: Overwrite = False,
) -> None:
    """ProcessBench rows or PRM800K-style ratings -> step view (cut at the first error) or ProcessBench."""
    from posttrainlab.data.formats import processbench as pb

    def to_step(row: dict) -> dict:
        return pb.pb_to_step(row) if pb.encoding(row) == "processbench" else pb.ratings_to_step(row, neutral)

    def to_pb(row: dict) -> dict:
        if pb.encoding(row) != "processbench":
            return pb.ratings_to_pb(row, neutral)
        reason = pb.check_pb_row(row)
        if reason is not None:
            raise ValueError(reason)
        return dict(row)

    _convert(source, out, _per_row(to_step if to == ProcessBenchTarget.step else to_pb), overwrite)


@convert_app.command("mc-value")
def convert_mc_value(
    source: Source,
    to: Annotated[McTarget, typer.Option("--to", help="traces (one record per id, sample_index) or rows (back).")],
    out: Out,
    unsorted: Annotated[
        bool,
        typer.Option("--unsorted", help="Rows of a trace may be scattered: group in memory, not as a stream."),
    ] = False,
    overwrite: Overwrite = False,
) -> None:
    """Polaris MC prefix rows <-> traces with one value per step."""
    from posttrainlab.data.formats.mc_value import group_traces, ungroup_traces

    if to == McTarget.traces:
        _convert(source, out, lambda rows: group_traces(rows, contiguous=not unsorted), overwrite)
    else:
        _convert(source, out, ungroup_traces, overwrite)


def validate(
    source: Source,
    fmt: FormatOption,
    disjoint: Annotated[
        list[str] | None,
        typer.Option("--disjoint", metavar="OTHER", help="mc-value: another split that must share no id with FILE."),
    ] = None,
) -> None:
    """Check every row of FILE; print each bad one (0-based index and reason); exit 2 if any."""
    from posttrainlab.data.formats import get_format
    from posttrainlab.data.formats.readers import iter_rows

    disjoint = disjoint or []
    if disjoint and fmt != FormatName.mc_value:
        raise BadInput("--disjoint applies to --format mc-value only")
    count = 0

    def counted(rows: Iterable[dict]) -> Iterator[dict]:
        nonlocal count
        for row in rows:
            count += 1
            yield row

    bad = 0
    for index, reason in get_format(fmt.value).validate(counted(iter_rows(source))):
        typer.echo(f"{source}: row {index}: {reason}")
        bad += 1
    shared = _shared_ids(source, disjoint) if disjoint else {}
    for pid, names in shared.items():
        typer.echo(f"{source}: id {pid!r} is in {', '.join(names)}")
    faults = [f"{bad} of {count} rows break the {fmt.value} format"] if bad else []
    faults += [f"{len(shared)} id(s) shared with {', '.join(disjoint)}"] if shared else []
    if faults:
        raise BadInput(f"{source}: {'; '.join(faults)}")
    also = f"; no id shared with {', '.join(disjoint)}" if disjoint else ""
    typer.echo(f"OK {source}: {count} rows, format {fmt.value}{also}")


def _shared_ids(source: str, others: list[str]) -> dict[str, list[str]]:
    from posttrainlab.data.formats.mc_value import problem_ids
    from posttrainlab.data.formats.readers import iter_rows
    from posttrainlab.data.formats.schema import RowError

    owner: dict[str, list[str]] = {}
    for name in [source, *others]:
        try:
            ids = problem_ids(iter_rows(name))
        except RowError as e:
            raise BadInput(f"{name}: row {e.index}: {e.reason}") from None
        for pid in ids:
            owner.setdefault(pid, []).append(name)
    return {pid: names for pid, names in sorted(owner.items()) if len(names) > 1}


def stats(
    source: Source,
    fmt: FormatOption,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of a table.")] = False,
) -> None:
    """Rows, steps per solution, share with an error, first-error position; the value table for mc-value."""
    from posttrainlab.data.formats import get_format
    from posttrainlab.data.formats.readers import iter_rows
    from posttrainlab.data.formats.schema import RowError

    try:
        result = get_format(fmt.value).stats(iter_rows(source))
    except RowError as e:
        raise BadInput(f"{source}: row {e.index}: {e.reason} (see `posttrain data validate`)") from None
    if as_json:
        from posttrainlab.data.jsonl import strict_json

        typer.echo(strict_json(result))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{source} ({fmt.value})")
    table.add_column("statistic")
    table.add_column("value", justify="right")
    for key, value in result.items():
        table.add_row(key, _show(key, value))
    Console().print(table)


def _show(key: str, value: Any) -> str:
    """A table cell: shares as percentages, other floats to 3 decimals, ``-`` for none."""
    if value is None:
        return "-"
    if isinstance(value, float):
        share = key in ("v_eq_0", "v_eq_1", "v_mid", "v_10_90", "correct", "error_share")
        return f"{100 * value:.1f}%" if share else f"{value:.3f}"
    return str(value)


def join(
    step: Annotated[str, typer.Option("--step", help="SHARP step view (question, steps, step_labels).")],
    span: Annotated[str, typer.Option("--span", help="The matching span view, row i = the same solution.")],
    out: Annotated[
        Path | None, typer.Option("--out", parser=out_file, help="Also write the joined rows (.jsonl or .parquet).")
    ] = None,
    text_only: Annotated[bool, typer.Option("--text-only", help="Check questions and steps, not labels.")] = False,
    overwrite: Overwrite = False,
) -> None:
    """Read a SHARP step file and its span file by position; check each pair is the same solution."""
    from posttrainlab.data.formats.readers import iter_rows
    from posttrainlab.data.formats.schema import RowError
    from posttrainlab.data.formats.sharp import join_record, join_step_span
    from posttrainlab.data.formats.writers import write_rows

    if out is not None:
        check_out_file(out, overwrite, {"--step": step, "--span": span})
    bad = count = 0

    def joined() -> Iterator[dict]:
        nonlocal bad, count
        try:
            for index, step_row, span_row, reason in join_step_span(
                iter_rows(step), iter_rows(span), check_labels=not text_only
            ):
                count += 1
                if reason is not None:
                    bad += 1
                    typer.echo(f"row {index}: {reason}")
                elif not bad:
                    yield join_record(step_row, span_row)
        except RowError as e:
            raise BadInput(f"{step} / {span}: row {e.index}: {e.reason}") from None
        if bad:
            raise BadInput(f"{step} / {span}: {bad} of {count} rows are not the same solution in both files")

    if out is None:
        for _ in joined():
            pass
    else:
        write_rows(out, joined())
    typer.echo(f"OK {count} rows: {step} and {span} describe the same solutions" + (f"; wrote {out}" if out else ""))


def register(data_app: typer.Typer) -> None:
    """Add ``convert …``, ``validate``, ``stats`` and ``join`` to the ``posttrain data`` group."""
    data_app.add_typer(convert_app, name="convert")
    data_app.command("validate")(validate)
    data_app.command("stats")(stats)
    data_app.command("join")(join)
