"""The report: per row and leg the medians over the runs, then wwwproxy's legs against the
others next to the targets (issue 32's for the cold misses)."""

from __future__ import annotations

import dataclasses

from .load import describe
from .rows import Leg, Row, fmt


@dataclasses.dataclass(frozen=True)
class Target:
    """One comparison of a row's subject (wwwproxy) with another leg: ``rps``, the subject's
    requests per second over the other's (at least ``bound``), ``done_rps`` the same counting
    the time to idle after each run; ``+p50``, the subject's p50 added over direct's p50, over
    the other's (at most ``bound``).  No bound: shown only."""

    baseline: str
    measure: str = "rps"
    bound: float | None = None

    def met(self, ratio: float) -> str:
        if self.bound is None or ratio != ratio:
            return "-"
        ok = ratio <= self.bound if self.measure == "+p50" else ratio >= self.bound
        return "yes" if ok else "NO"

    def describe_bound(self) -> str:
        if self.bound is None:
            return "-"
        return f"{'<=' if self.measure == '+p50' else '>='} {self.bound:.1f}"

    @property
    def unit(self) -> str:
        return {"rps": "rps", "done_rps": "done/s", "+p50": "+p50 ms"}[self.measure]


#: per row, in the order printed; the rows' keys are the --rows choices
TARGETS: dict[str, tuple[Target, ...]] = {
    "hits-1k": (Target("Squid", "rps", 2.1), Target("direct")),
    "hits-100k": (Target("Squid", "rps", 6.8), Target("direct")),
    "disk-100k": (Target("Squid", "rps", 0.5),),
    "https-1k": (Target("wwwproxy http", "rps", 0.5),),
    "misses-1k": (
        Target("warcprox", "rps", 1.5),
        Target("warcprox", "done_rps"),
        Target("warcprox+dedup"),
        Target("Squid", "rps", 0.3),
        Target("Squid", "+p50"),
        Target("direct"),
    ),
    "misses-mixed": (
        Target("warcprox", "rps", 1.5),
        Target("warcprox", "done_rps"),
        Target("warcprox+dedup"),
        Target("Squid", "rps", 0.8),
        Target("Squid", "+p50", 2.0),
        Target("direct"),
    ),
}


def added_p50(row: Row, leg: Leg) -> float | None:
    """``leg``'s p50 less direct's, ms (None: the row has no direct leg)."""
    direct = row.leg("direct")
    if direct is None or leg is direct:
        return None
    return leg.median("p50_ms") - direct.median("p50_ms")


def leg_table(rows: list[Row]) -> list[str]:
    header = (
        f"  {'server':<19} {'rps':>6} {'done/s':>6} {'p50 ms':>6} {'+p50':>6} {'p99 ms':>7} "
        f"{'errors':>6} "
        f"{'cpu us/req':>10} {'cpu %':>5} {'peak RSS':>8}  served as"
    )
    out = [header, "-" * (len(header) + 12)]
    for row in rows:
        out.append(row.title)
        for leg in row.legs:
            rss = f"{leg.rss_kib / 1024:.0f} MiB" if leg.rss_kib else "-"
            out.append(
                f"  {leg.label:<19} {fmt(leg.median('rps'), '.0f'):>6} "
                f"{fmt(leg.median('done_rps'), '.0f'):>6} "
                f"{fmt(leg.median('p50_ms'), '.2f'):>6} {fmt(added_p50(row, leg), '.2f'):>6} "
                f"{fmt(leg.median('p99_ms'), '.2f'):>7} {leg.errors:>6} "
                f"{fmt(leg.median('cpu_us'), '.0f'):>10} {fmt(leg.median('cpu_pct'), '.0f'):>5} "
                f"{rss:>8}  {describe(leg.served)}"
            )
    return out


def comparison(row: Row, subject: Leg, base: Leg, target: Target) -> tuple[float, float, float]:
    """(the subject's figure, the baseline's, their ratio) for ``target``'s measure."""
    if target.measure != "+p50":
        mine, theirs = subject.median(target.measure), base.median(target.measure)
    else:
        added = (added_p50(row, subject), added_p50(row, base))
        mine, theirs = (float("nan") if a is None else a for a in added)
    ratio = mine / theirs if theirs > 0 else float("nan")
    return mine, theirs, ratio


def ratio_table(rows: list[Row]) -> list[str]:
    header = f"{'row':<37} {'compared':<38} {'':>8} {'':>8} {'ratio':>6} {'target':>7} {'met':>3}"
    out = [header, "-" * len(header)]
    for row in rows:
        title = row.title
        for label in row.subjects:
            subject = row.leg(label)
            if subject is None:
                continue
            for target in TARGETS[row.key]:
                base = row.leg(target.baseline)
                if base is None:
                    continue
                mine, theirs, ratio = comparison(row, subject, base, target)
                spec = ".2f" if target.measure == "+p50" else ".0f"
                what = f"{label} / {base.label} {target.unit}"
                out.append(
                    f"{title:<37} {what:<38} {fmt(mine, spec):>8} {fmt(theirs, spec):>8} "
                    f"{fmt(ratio, '.2f') + 'x':>6} {target.describe_bound():>7} "
                    f"{target.met(ratio):>3}"
                )
                title = ""
    return out


def print_report(rows: list[Row], extra: list[str]) -> None:
    """Per row and server the medians; then wwwproxy against the others, and the targets."""
    print()
    print("\n".join(leg_table(rows)))
    print()
    print("\n".join(ratio_table(rows)))
    for row in rows:
        for note in row.notes:
            print(note)
    for line in extra:
        print(line)
