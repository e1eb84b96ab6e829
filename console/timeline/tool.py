"""``timeline`` command line: capture (alias decode), export, validate, measure, and the IKeT
route for CuTe DSL kernels: capture-iket, export-iket, profile-iket.

Exit codes: 0 success; 1 the measurement ran but the overhead verdict is not within target
(measure only); 2 rejected or unusable input, with one ``timeline: <reasons>`` line on
stderr; 130 interrupted. Data (JSON) goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

EXIT_OK, EXIT_FAILURE, EXIT_REJECTED, EXIT_INTERRUPTED = 0, 1, 2, 130


def _reject(reasons) -> int:
    text = "; ".join(str(r) for r in reasons) if isinstance(reasons, (list, tuple)) else str(reasons)
    print(f"timeline: {' '.join(text.split())}", file=sys.stderr)
    return EXIT_REJECTED


def _argv(text: str) -> list[str]:
    value = json.loads(text)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ValueError(f"command must be a JSON list of strings, got {text!r}")
    return value


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line; with ``only``, that verb's subcommand alone (argparse takes about a
    millisecond per subcommand, a tenth of a whole ``decode`` on a small capture)."""
    parser = argparse.ArgumentParser(prog="timeline", description="Intra-kernel timeline tools (ATREXLT1).")
    sub = parser.add_subparsers(dest="verb", required=True)

    def wanted(verb: str) -> bool:
        return only is None or verb == only

    for verb in filter(wanted, ("capture", "decode")):
        p = sub.add_parser(verb, help="decode a raw buffer; write trace, summary and receipt")
        p.add_argument("--raw", required=True)
        p.add_argument("--manifest", required=True)
        p.add_argument("--dictionary", required=True)
        p.add_argument("--clean-source", required=True)
        p.add_argument("--instrumented-source", required=True)
        p.add_argument("--binary")
        p.add_argument("--workload-identity", required=True)
        p.add_argument("--correctness", choices=("passed", "failed", "unknown"),
                       help="as reported; an evaluator record (--correctness-evidence) must not contradict it")
        p.add_argument("--correctness-evidence")
        p.add_argument("--measurement")
        p.add_argument("--stage", choices=("exploration", "final"), default="exploration")
        p.add_argument("--low-overhead-target", type=float, default=10.0)
        p.add_argument("--interval", action="append", default=[], metavar="'A -> B'",
                       help="named interval from canonical events (repeatable): 'A -> B' from each end of A "
                       "to the next begin of B, 'A => B' from each begin of A to the next begin of B")
        p.add_argument("--output-dir", required=True)
    for verb in filter(wanted, ("export-iket", "profile-iket")):
        helps = {"export-iket": "normalize one capture-iket run into the canonical trace, summary and receipt",
                 "profile-iket": "capture-iket then export-iket in one go"}
        p = sub.add_parser(verb, help=helps[verb])
        if verb == "export-iket":
            p.add_argument("--run-dir", required=True, help="an attempt directory written by capture-iket")
        else:
            p.add_argument("--capture-dir", required=True, help="capture-iket --output-dir")
            p.add_argument("--run-iket", help="profiler executable (default: run-iket on PATH)")
            p.add_argument("--profile-arg", action="append", default=[])
            p.add_argument("--timeout", type=float, default=600.0)
        p.add_argument("--kernel-regex", required=True, help="full match on the launch's kernel name")
        p.add_argument("--launch", type=int, help="ordinal among the matching launches (needed when several)")
        p.add_argument("--dictionary", required=True)
        p.add_argument("--clean-source", required=True)
        p.add_argument("--instrumented-source", required=True)
        p.add_argument("--workload-identity", required=True)
        p.add_argument("--correctness", choices=("passed", "failed", "unknown"),
                       help="as reported; an evaluator record (--correctness-evidence) must not contradict it")
        p.add_argument("--correctness-evidence")
        p.add_argument("--measurement")
        p.add_argument("--stage", choices=("exploration", "final"), default="exploration")
        p.add_argument("--low-overhead-target", type=float, default=10.0)
        p.add_argument("--interval", action="append", default=[], metavar="'A -> B'",
                       help="as for capture: 'A -> B' end to next begin, 'A => B' begin to next begin")
        p.add_argument("--output-dir", required=True)
        if verb == "profile-iket":
            p.add_argument("workload", nargs=argparse.REMAINDER, help="-- command ...")
    if wanted("export"):
        p = sub.add_parser("export", help="write Chrome JSON and Perfetto protobuf traces")
        p.add_argument("--receipt", help="take raw/manifest/dictionary from this receipt")
        p.add_argument("--raw")
        p.add_argument("--manifest")
        p.add_argument("--dictionary")
        p.add_argument("--output-dir", required=True)
    if wanted("validate"):
        p = sub.add_parser("validate", help="re-hash, re-decode and re-classify a receipt")
        p.add_argument("receipt")
    if wanted("measure"):
        p = sub.add_parser("measure", help="ABBA/BAAB overhead of instrumented vs baseline, fresh processes")
        p.add_argument("--baseline-command", required=True, help="JSON argv")
        p.add_argument("--instrumented-command", required=True, help="JSON argv")
        p.add_argument("--baseline-source", required=True)
        p.add_argument("--instrumented-source", required=True)
        p.add_argument("--baseline-binary")
        p.add_argument("--instrumented-binary")
        p.add_argument("--warmup", type=int, default=10)
        p.add_argument("--iterations", type=int, default=100)
        p.add_argument("--min-blocks", type=int, default=2)
        p.add_argument("--max-blocks", type=int, default=2)
        p.add_argument("--ci-width", type=float, help="stop once the 95%% interval is narrower (percentage points)")
        p.add_argument("--target-percent", type=float, default=10.0)
        p.add_argument("--order", action="append", choices=("ABBA", "BAAB"),
                       help="fixed blocks in this order (repeatable; equally many ABBA and BAAB), instead of adaptive ones")
        p.add_argument("--workload-identity")
        p.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
        p.add_argument("--output", required=True)
    if wanted("capture-iket"):
        p = sub.add_parser("capture-iket", help="run a command under run-iket profile --keep --postprocess all")
        p.add_argument("--output-dir", required=True, help="a fresh attempt-NNN directory is made inside")
        p.add_argument("--run-iket", help="profiler executable (default: run-iket on PATH)")
        p.add_argument("--profile-arg", action="append", default=[], help="extra run-iket profile flag (repeatable)")
        p.add_argument("--timeout", type=float, default=600.0, help="seconds for the whole profile")
        p.add_argument("workload", nargs=argparse.REMAINDER, help="-- command ...")
    return parser


def run_capture(args) -> int:
    from .decode import CaptureRejected
    from .manifest import SpecError
    from .receipt import ReceiptError, write_capture

    try:
        receipt = write_capture(
            raw=args.raw, manifest=args.manifest, dictionary=args.dictionary, clean_source=args.clean_source,
            instrumented_source=args.instrumented_source, binary=args.binary,
            workload_identity=args.workload_identity, correctness=args.correctness,
            correctness_evidence=args.correctness_evidence, measurement=args.measurement, stage=args.stage,
            low_overhead_target=args.low_overhead_target, output_dir=args.output_dir,
            intervals=tuple(args.interval))
    except CaptureRejected as exc:
        return _reject(exc.problems)
    except (SpecError, ReceiptError) as exc:
        return _reject(str(exc))
    except (OSError, ValueError) as exc:
        return _reject(f"{type(exc).__name__}: {exc}")
    print(json.dumps({"receipt": str(Path(args.output_dir) / "receipt.json"),
                      "evidence_class": receipt["evidence_class"],
                      "classification_reasons": receipt["classification_reasons"]}, sort_keys=True))
    return EXIT_OK


def _path(named) -> str:
    """A receipt names a file by its path, or by an object holding ``path`` and ``sha256``."""
    return named["path"] if isinstance(named, dict) else named


def run_export(args) -> int:
    from console.formats.plainjson import atomic_write_bytes

    from . import export
    from .decode import CaptureRejected, decode
    from .manifest import SpecError, load_json, parse_dictionary, parse_manifest

    try:
        if args.receipt:
            receipt = load_json(args.receipt)
            base = Path(args.receipt).parent
            # an IKeT receipt names AKA's IKeT files; episcope's ATREXLT1 buffer is under episcope.iket
            names = receipt
            if receipt.get("backend") == "iket":
                names = ((receipt.get("episcope") or {}).get("iket") or {}).get("files")
                if not isinstance(names, dict):
                    return _reject("IKeT receipt without episcope's ATREXLT1 buffer (written by another tool); "
                                   "its trace is already a Chrome JSON trace")
            raw, manifest, dictionary = (base / _path(names["raw"]), base / _path(names["manifest"]),
                                         base / _path(names["event_dictionary"]))
        elif args.raw and args.manifest and args.dictionary:
            raw, manifest, dictionary = args.raw, args.manifest, args.dictionary
        else:
            return _reject("export needs --receipt or all of --raw, --manifest, --dictionary")
        capture = decode(Path(raw).read_bytes(), parse_manifest(load_json(manifest)),
                         parse_dictionary(load_json(dictionary)))
    except CaptureRejected as exc:
        return _reject(exc.problems)
    except (SpecError, OSError, ValueError, KeyError, TypeError) as exc:
        return _reject(f"{type(exc).__name__}: {exc}")
    out = Path(args.output_dir)
    atomic_write_bytes(out / export.JSON_TRACE_NAME, export.chrome_trace_bytes(capture))
    atomic_write_bytes(out / export.PROTO_TRACE_NAME, export.perfetto_trace_bytes(capture))
    print(json.dumps({"chrome_json": str(out / export.JSON_TRACE_NAME),
                      "perfetto_protobuf": str(out / export.PROTO_TRACE_NAME)}, sort_keys=True))
    return EXIT_OK


def run_validate(args) -> int:
    from .validate import validate_receipt

    reasons = validate_receipt(args.receipt)
    if reasons:
        return _reject(reasons)
    print(json.dumps({"receipt": args.receipt, "valid": True}, sort_keys=True))
    return EXIT_OK


def run_measure(args) -> int:
    from .measure import MeasureConfig, MeasureError, measure

    try:
        config = MeasureConfig(
            baseline_command=_argv(args.baseline_command), instrumented_command=_argv(args.instrumented_command),
            baseline_source=args.baseline_source, instrumented_source=args.instrumented_source,
            baseline_binary=args.baseline_binary, instrumented_binary=args.instrumented_binary,
            output=args.output, warmup=args.warmup, iterations=args.iterations, min_blocks=args.min_blocks,
            max_blocks=max(args.max_blocks, args.min_blocks), ci_width=args.ci_width,
            target_percent=args.target_percent, timeout=args.timeout, workload_identity=args.workload_identity,
            orders=args.order)
        artifact = measure(config)
    except (MeasureError, ValueError, OSError) as exc:
        return _reject(str(exc))
    keys = ("baseline_ms", "instrumented_ms", "overhead_percent", "interval", "rank_test", "verdict",
            "blocks", "stop_reason")
    print(json.dumps({k: artifact[k] for k in keys}, sort_keys=True))
    return EXIT_OK if artifact["verdict"] == "within_target" else EXIT_FAILURE


def _capture_iket(args, output_dir: str):
    """Run the workload under run-iket into ``output_dir``: (attempt dir, record, problems);
    raises IketCaptureError or OSError when it cannot run."""
    from .iket_capture import capture

    command = args.workload[1:] if args.workload[:1] == ["--"] else args.workload
    return capture(command, output_dir, run_iket=args.run_iket, extra_profile_args=tuple(args.profile_arg),
                   timeout=args.timeout)


def run_capture_iket(args) -> int:
    from .iket_capture import IketCaptureError

    try:
        attempt, record, problems = _capture_iket(args, args.output_dir)
    except (IketCaptureError, OSError) as exc:
        return _reject(str(exc))
    print(json.dumps({"run_dir": str(attempt), "exit_code": record["exit_code"], "accepted": record["accepted"],
                      "trace_json": [o["path"] for o in record["outputs"].get("trace_json", [])],
                      "pftrace": [o["path"] for o in record["outputs"].get("pftrace", [])]}, sort_keys=True))
    return _reject(problems) if problems else EXIT_OK


def _export_iket(args, run_dir: str) -> int:
    from .decode import CaptureRejected
    from .iket import IketExportError, export_iket
    from .manifest import SpecError
    from .receipt import ReceiptError

    try:
        receipt = export_iket(
            run_dir=run_dir, kernel_regex=args.kernel_regex, dictionary=args.dictionary, launch=args.launch,
            output_dir=args.output_dir, clean_source=args.clean_source, instrumented_source=args.instrumented_source,
            workload_identity=args.workload_identity, correctness=args.correctness,
            correctness_evidence=args.correctness_evidence, measurement=args.measurement, stage=args.stage,
            low_overhead_target=args.low_overhead_target, intervals=tuple(args.interval))
    except IketExportError as exc:
        return _reject(exc.problems)
    except CaptureRejected as exc:
        return _reject(exc.problems)
    except (SpecError, ReceiptError) as exc:
        return _reject(str(exc))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return _reject(f"{type(exc).__name__}: {exc}")
    print(json.dumps({"receipt": str(Path(args.output_dir) / "receipt.json"), "run_dir": run_dir,
                      "kernel_name": receipt["episcope"]["iket"]["kernel_name"],
                      "evidence_class": receipt["evidence_class"],
                      "classification_reasons": receipt["classification_reasons"]}, sort_keys=True))
    return EXIT_OK


def run_export_iket(args) -> int:
    return _export_iket(args, args.run_dir)


def run_profile_iket(args) -> int:
    from .iket_capture import IketCaptureError

    try:
        attempt, _, problems = _capture_iket(args, args.capture_dir)
    except (IketCaptureError, OSError) as exc:
        return _reject(str(exc))
    if problems:
        return _reject(problems)
    return _export_iket(args, str(attempt))


# Each verb's handler; ``build_parser`` defines the same verbs' arguments.
HANDLERS = {"capture": run_capture, "decode": run_capture, "export": run_export, "validate": run_validate,
            "measure": run_measure, "capture-iket": run_capture_iket, "export-iket": run_export_iket,
            "profile-iket": run_profile_iket}


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    args = build_parser(given[0] if given and given[0] in HANDLERS else None).parse_args(given)
    try:
        return HANDLERS[args.verb](args)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
