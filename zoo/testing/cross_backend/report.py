"""The report of the cross-backend check: one dict per recipe (settings,
every variant's checks, failures, warnings), the exit status of one or
several, a readable table and the line that sums up a run of several.
`run_check` writes one with
`zoo.saving.write_json_atomic(report, path, strict=True)`, `run_checks`
`{recipe: report}`."""

import itertools

from zoo.testing.cross_backend.compare import (
    FULL_METRICS,
    LEARNING_RATES,
    TOLERANCES,
    format_number,
    relative_diffs,
)


def build_report(
    recipe,
    variant_results,
    backends,
    *,
    smoke,
    steps,
    full,
    optimizer="sgd",
    learning_rate=None,
    wall_seconds=None,
    workers=None,
    full_tolerances=None,
):
    """The whole report: settings, every variant's checks, the failures."""
    failures = [
        f"{variant}: {message}"
        for variant, result in variant_results.items()
        for message in result["failures"]
    ]
    warnings = {}  # message -> variants, so one line covers them all
    for variant, result in variant_results.items():
        for name, issues in (result.get("portability") or {}).items():
            for issue in issues:
                warnings.setdefault(f"{name} {issue}", []).append(variant)
    return {
        "recipe": recipe,
        "backends": list(backends),
        "smoke": bool(smoke),
        "steps": int(steps),
        "full": bool(full),
        "optimizer": optimizer,
        "learning_rate": (
            LEARNING_RATES[optimizer]
            if learning_rate is None
            else learning_rate
        ),
        "tolerances": dict(TOLERANCES),
        "full_tolerances": full_tolerances or FULL_METRICS,
        "variants": variant_results,
        "workers": workers or {},
        "wall_seconds": wall_seconds,
        "failures": failures,
        "warnings": [
            f"{message} [{', '.join(variants)}]"
            for message, variants in warnings.items()
        ],
        "passed": not failures,
    }


def exit_status(reports):
    """The command line's exit status for a report or a list of reports:
    0 when every check passed, else 1."""
    if isinstance(reports, dict):
        reports = [reports]
    return 0 if all(report["passed"] for report in reports) else 1


def summary_line(reports, wall_seconds=None):
    """One line for a run of several recipes: how many passed, the ones
    that failed by name, and the run's wall time."""
    failed = [report["recipe"] for report in reports if not report["passed"]]
    line = (
        f"check_backends: {len(failed)} of {len(reports)} recipes FAILED "
        f"({', '.join(failed)})"
        if failed
        else f"check_backends: all {len(reports)} recipes passed"
    )
    if wall_seconds is not None:
        line += f", wall time {wall_seconds:.0f} s"
    return line


def format_table(report, verbose=False):
    """One readable table for the recipe (rows = variants), the failures,
    and with `verbose` the per-pair numbers and per-step losses."""
    backends = report["backends"]
    columns = [
        ("variant", None),
        ("forward max|d|", "forward"),
        ("loss max rel", "loss"),
        ("weights max|d|", "weights"),
        ("saved 3x3 max|d|", "saved"),
    ]
    if any(r.get("generate") for r in report["variants"].values()):
        columns.append(("generate 3x3 differing", "generate"))
    if report["full"]:
        columns.append(("full max|d|", "full"))
    columns.append(("result", None))
    rows = []
    for variant, result in report["variants"].items():
        row = [variant]
        for _, check in columns[1:-1]:
            data = result.get(check)
            if data is None:
                row.append("-")
            elif check == "full":
                row.append(f"{data['max']:.4f}")
            elif check == "generate":
                row.append(str(data["max"]))
            else:
                row.append(format_number(data["max"]))
        row.append("pass" if result["passed"] else "FAIL")
        rows.append(row)
    header = [title for title, _ in columns]
    widths = [
        max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))
    ]

    def line(cells):
        return "  ".join(
            str(c).ljust(w) for c, w in zip(cells, widths)
        ).rstrip()

    settings = (
        f"{'smoke' if report['smoke'] else 'real'} data, "
        f"{report['steps']} {report['optimizer']} steps (lr "
        f"{report['learning_rate']:g}), "
        f"backends {', '.join(backends)}"
    )
    out = [
        f"{report['recipe']}: {settings}",
        line(header),
        line(["-" * w for w in widths]),
    ]
    out += [line(r) for r in rows]
    tol = report["tolerances"]
    out.append(
        f"tolerances: forward {format_number(tol['forward'])} abs, loss "
        f"{format_number(tol['loss'])} rel, saved {format_number(tol['saved'])} abs"
        + (
            ", generated text exact"
            if any(r.get("generate") for r in report["variants"].values())
            else ""
        )
        + (f", full {report.get('full_tolerances')}" if report["full"] else "")
        + "; weights reported (the next step's loss gates each update)"
    )
    if report.get("wall_seconds") is not None:
        out.append(f"wall time: {report['wall_seconds']:.0f} s")
    if verbose:
        for variant, result in report["variants"].items():
            out.append("")
            out.append(f"== {variant}")
            for check in ("forward", "loss", "weights", "full"):
                data = result.get(check)
                if data:
                    pairs = ", ".join(
                        f"{p} {format_number(d)}"
                        for p, d in data["pairs"].items()
                    )
                    out.append(f"{check}: {pairs}")
            generated = result.get("generate")
            if generated:
                out.append(f"generated (reference): {generated['reference']!r}")
            saved = result.get("saved")
            if saved:
                out.append(
                    f"saved (rows: saved by, columns: loaded by; vs "
                    f"{saved['reference']}):"
                )
                out.append("  " + " ".join(f"{b:>10}" for b in [""] + backends))
                for saver in backends:
                    out.append(
                        "  "
                        + f"{saver:>10} "
                        + " ".join(
                            f"{format_number(saved['matrix'][saver][b]):>10}"
                            for b in backends
                        )
                    )
            loss = result.get("loss")
            if loss:
                out.append("per-step losses:")
                out.append(
                    "  step "
                    + " ".join(f"{b:>12}" for b in backends)
                    + "      max rel"
                )
                per_step = loss["per_step"]
                for i in range(len(per_step[backends[0]])):
                    values = [per_step[b][i] for b in backends]
                    rel = max(
                        (
                            relative_diffs([x], [y])[0]
                            for x, y in itertools.combinations(values, 2)
                        ),
                        default=0.0,
                    )
                    out.append(
                        f"  {i:>4} "
                        + " ".join(f"{v:>12.8f}" for v in values)
                        + f"  {format_number(rel):>11}"
                    )
    if report.get("warnings"):
        out.append("")
        out.append("warnings (not gated): saved files tied to one backend")
        out += [f"  {message}" for message in report["warnings"]]
    if report["failures"]:
        out.append("")
        out.append("FAILED checks:")
        out += [f"  {message}" for message in report["failures"]]
    else:
        out.append("all checks passed")
    return "\n".join(out)
