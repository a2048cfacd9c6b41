"""Weighted pgbench scripts that drive the TPROC-C transactions.

Six scripts, always in this order, so that pgbench's ``script_no`` (0-based, fourth
column of the ``-l`` log; "SQL script N" counts from 1 in its summary) names the
transaction type and its outcome:

    0 new_order            New-Order that commits
    1 new_order_rollback   New-Order with an invalid last item: really rolled back
    2 payment
    3 order_status
    4 delivery
    5 stock_level

Why the rollback is its own script: pgbench aborts a client on any error other than a
serialization failure or a deadlock, so the invalid-item New-Order cannot raise. Its
function returns 0 instead, and the script wraps the call in BEGIN ... ROLLBACK (one
round trip in simple mode, where the three statements travel as one query). The order,
its lines and the district's counter vanish; pg_stat_database counts a rollback; and
pgbench's per-script counts (and the log's script_no) give the number of rollbacks.
The 1% is drawn by pgbench's weighted choice: weight 45 x 99% and 45 x 1% of the mix.

Random inputs are drawn by the server, in the statement that makes the call: a script is
``SELECT tprocc_x(d.a, ...) FROM tprocc_draw_x(:w_id, <constants>) AS d`` (see
sql/transactions.sql), one round trip and one or two meta-commands. The run's NURand
constants C, the warehouse count and the percentages travel as literals in the script.
NURand(A, x, y) is ``((random(0, A) | random(x, y)) + C) % (y - x + 1) + x`` as before;
only who draws changed. pgbench drawing them took some fifty expressions and as many
parameters per New-Order, about 8% of the server's CPU per New-Order.

Compliant mode (keying_thinking) puts a pgbench sleep for the keying time before the call and
for the think time after it, so pgbench's latency of such a transaction is keying +
response + think: per-type response times are not pgbench's latencies in that mode
(``-r`` gives their exact means). A retried transaction sleeps again, as a terminal
re-keying it would.

pgbench looks at its ``-T`` only between transactions, so a terminal that starts a think
time of up to 120 s just before the end would hold the whole run up that long. When the
run's length is known, each terminal adds up the time it has slept (``slept_us``, 0 at the
start through pgbench's ``-D``) and cuts a sleep where that sum reaches ``-T`` + a second.
A terminal has been running at least as long as it has slept, and pgbench's timer starts
before its clients connect: the cut is never before pgbench's own end, so it only moves a
call that would have come after the window, and no terminal runs calls back to back while
pgbench still runs. It comes after that end by the time the terminal spent in its calls.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pgdyno.workloads.tprocc import schema
from pgdyno.workloads.tprocc.model import (
    TRANSACTIONS,
    Mix,
    NURandConstants,
    ScriptInfo,
    ScriptOptions,
    Serialisable,
)

if TYPE_CHECKING:
    from pgdyno.workloads.engine.pgbench import ScriptSpec

SCRIPT_ORDER: tuple[tuple[str, str, str], ...] = (
    ("new_order", "new_order", "commit"),
    ("new_order_rollback", "new_order", "rollback"),
    ("payment", "payment", "commit"),
    ("order_status", "order_status", "commit"),
    ("delivery", "delivery", "commit"),
    ("stock_level", "stock_level", "commit"),
)
"""(script name, transaction type, outcome) by script_no."""

_TRANSACTION_OF = {name: transaction for name, transaction, _ in SCRIPT_ORDER}

WEIGHT_SCALE = 100
"""pgbench weights are integers: percent x 100 keeps 0.01% of resolution."""

KEYING_S = {"new_order": 18.0, "payment": 3.0, "order_status": 2.0, "delivery": 2.0,
            "stock_level": 2.0}
THINK_MEAN_S = {"new_order": 12.0, "payment": 12.0, "order_status": 10.0, "delivery": 5.0,
                "stock_level": 5.0}
THINK_CAP = 10
"""Think times are capped at 10 x their mean."""
TERMINALS_PER_WAREHOUSE = 10

SLEEP_END_GRACE_S = 1
"""A second past ``-T`` before sleeps are cut: pgbench's alarm has whole-second steps."""
SLEPT = "slept_us"
"""The pgbench variable that adds up a terminal's sleeps (``-D slept_us=0`` starts it)."""

INVALID_ITEM = schema.ITEMS + 1
"""The item of a rolled-back New-Order's last line; tprocc_draw_new_order writes the same
value (test_tprocc_run checks that they agree)."""

# Allowed distance between the run-time and load-time C of last names (clause 2.1.6.1).
_C_LAST_DELTAS = [d for d in range(65, 120) if d not in (96, 112)]


def choose_constants(seed: int | None = None) -> NURandConstants:
    rng = random.Random(seed)
    delta = rng.choice(_C_LAST_DELTAS)
    c_last = schema.LOAD_C_LAST + delta if schema.LOAD_C_LAST + delta <= 255 \
        else schema.LOAD_C_LAST - delta
    return NURandConstants(c_last=c_last, c_id=rng.randint(0, 1023),
                           ol_i_id=rng.randint(0, 8191))


def script_for(script_no: int) -> tuple[str, str, str]:
    """(script name, transaction type, outcome) of pgbench's 0-based script number."""
    return SCRIPT_ORDER[script_no]


def ideal_nopm(warehouses: int, mix: Mix | None = None, time_scale: float = 1.0) -> float:
    """New orders per minute that compliant terminals reach with zero response time.

    Each of the 10 terminals per warehouse cycles keying + think for the chosen type;
    with the default mix that is 12.86 per warehouse (rolled-back ones included)."""
    mix = mix or Mix()
    cycle_s = sum(mix.share(t) * (KEYING_S[t] + THINK_MEAN_S[t]) for t in TRANSACTIONS)
    per_terminal = 60.0 / (cycle_s * time_scale) * mix.share("new_order")
    return per_terminal * TERMINALS_PER_WAREHOUSE * warehouses


@dataclass(frozen=True)
class ScriptSet(Serialisable):
    """The generated scripts and what pgbench needs to run them."""

    options: ScriptOptions
    constants: NURandConstants
    scripts: tuple[ScriptInfo, ...]
    texts: tuple[str, ...]
    """Script bodies, in script_no order."""

    @property
    def clients(self) -> int | None:
        """Clients the mode requires (compliant: 10 per warehouse), else None (free)."""
        if self.options.keying_thinking:
            return TERMINALS_PER_WAREHOUSE * self.options.warehouses
        return None

    @property
    def defines(self) -> tuple[tuple[str, int], ...]:
        """pgbench variables every terminal starts with: its sleeps so far, when cut."""
        if self.options.keying_thinking and self.options.run_s is not None:
            return ((SLEPT, 0),)
        return ()

    def write(self, directory: Path) -> list[Path]:
        directory.mkdir(parents=True, exist_ok=True)
        paths = []
        for info, text in zip(self.scripts, self.texts, strict=True):
            path = directory / info.file_name
            path.write_text(text)
            paths.append(path)
        return paths

    def specs(self, directory: Path) -> list[ScriptSpec]:
        """Every script as pgbench's engine runs it, in script_no order (writes the files).

        Scripts of weight 0 are passed too, so that script_no never shifts."""
        from pgdyno.workloads.engine.pgbench import ScriptSpec

        return [ScriptSpec(name=info.name, weight=info.weight, path=path, defines=self.defines)
                for info, path in zip(self.scripts, self.write(directory), strict=True)]

    def pgbench_args(self, directory: Path) -> list[str]:
        """``-D`` for the variables the scripts start with, then ``-f file@weight`` each."""
        from pgdyno.workloads.engine.pgbench import script_args

        return script_args(self.specs(directory))

    def transaction_of(self, script_no: int) -> str:
        return self.scripts[script_no].transaction


def generate(options: ScriptOptions) -> ScriptSet:
    constants = choose_constants(options.seed)
    gen = _Generator(options, constants)
    weights = _weights(options)
    infos, texts = [], []
    for no, (name, transaction, outcome) in enumerate(SCRIPT_ORDER):
        infos.append(ScriptInfo(script_no=no, name=name, transaction=transaction,
                                outcome=outcome, weight=weights[name],
                                file_name=f"tprocc_{no}_{name}.pgbench"))
        texts.append(gen.script(name))
    return ScriptSet(options=options, constants=constants, scripts=tuple(infos),
                     texts=tuple(texts))


def _weights(options: ScriptOptions) -> dict[str, int]:
    mix = options.mix
    weights = {t: round(mix.share(t) * 100 * WEIGHT_SCALE) for t in TRANSACTIONS}
    new_order = weights.pop("new_order")
    rollback = round(new_order * options.rollback_pct / 100)
    weights["new_order"] = new_order - rollback
    weights["new_order_rollback"] = rollback
    return weights


class _Generator:
    """Writes the text of each script for one set of options and constants."""

    def __init__(self, options: ScriptOptions, constants: NURandConstants) -> None:
        self.o = options
        self.c = constants
        self.w = options.warehouses

    def script(self, name: str) -> str:
        transaction = _TRANSACTION_OF[name]
        body = {
            "new_order": lambda: self._new_order(rollback=False),
            "new_order_rollback": lambda: self._new_order(rollback=True),
            "payment": self._payment,
            "order_status": self._order_status,
            "delivery": self._delivery,
            "stock_level": self._stock_level,
        }[name]()
        lines = [f"-- pgdyno TPROC-C: {name} (generated; do not edit)"]
        lines += self._home(name)
        if self.o.keying_thinking:
            lines += self._keying(transaction)
        lines += body
        if self.o.keying_thinking:
            lines += self._think(transaction)
        return "\n".join(lines) + "\n"

    # ----- pieces ------------------------------------------------------------------------
    def _home(self, name: str) -> list[str]:
        """Home warehouse and district of the client (pgbench's 0-based :client_id).

        Clients 0..W-1 take warehouses 1..W with district 1, the next W district 2, and
        so on: in compliant mode (10 x W clients) every district has one terminal. The
        district is set only where the script uses it."""
        if self.o.all_warehouses:
            warehouse = f"random(1, {self.w})"
        else:
            warehouse = f"(:client_id % {self.w}) + 1"
        lines = [f"\\set w_id {warehouse}"]
        if self.o.keying_thinking or name == "stock_level":
            lines.append(f"\\set home_d_id ((:client_id / {self.w}) % 10) + 1")
        return lines

    def _district(self) -> str:
        """District argument of a draw: the terminal's own in compliant mode, else 0 (the
        server draws one uniformly)."""
        return ":home_d_id" if self.o.keying_thinking else "0"

    def _us(self, seconds: float) -> int:
        return max(0, round(seconds * self.o.time_scale * 1_000_000))

    def _keying(self, transaction: str) -> list[str]:
        keying = self._us(KEYING_S[transaction])
        if self.o.run_s is None:
            return [f"\\sleep {keying} us"]
        return self._sleep("keying_us", str(keying))

    def _think(self, transaction: str) -> list[str]:
        mean = self._us(THINK_MEAN_S[transaction])
        # -ln(U) x mean with U in (0, 1], capped at 10 x mean (clause 5.2.5.4).
        return self._sleep("think_us", f"least(int(-ln(random(1, 1000000) / 1000000.0) * "
                                       f"{mean}), {THINK_CAP * mean})")

    def _sleep(self, name: str, length: str) -> list[str]:
        """A sleep of ``length`` microseconds, cut where the terminal's sleeps reach the
        run's end when it is known."""
        if self.o.run_s is None:
            return [f"\\set {name} {length}", f"\\sleep :{name} us"]
        end_us = (self.o.run_s + SLEEP_END_GRACE_S) * 1_000_000
        return [f"\\set {name} least({length}, greatest(0, {end_us} - :{SLEPT}))",
                f"\\set {SLEPT} :{SLEPT} + :{name}",
                f"\\sleep :{name} us"]

    def _remote_pct(self, pct: float) -> str:
        """A percentage for the server's draws; 0 with one warehouse (nowhere remote)."""
        return f"{pct:g}" if self.w > 1 else "0"

    def _new_order(self, rollback: bool) -> list[str]:
        draw = (f"tprocc_draw_new_order(:w_id, {self._district()}, {str(rollback).lower()}, "
                f"{self.w}, {self.c.c_id}, {self.c.ol_i_id}, "
                f"{self._remote_pct(self.o.remote_line_pct)})")
        call = ("SELECT tprocc_new_order(:w_id, o.d_id, o.c_id, o.ol_cnt, o.items, o.supply, "
                f"o.qty) FROM {draw} AS o")
        if not rollback:
            return [call + ";"]
        return self._rolled_back(call)

    def _rolled_back(self, call: str) -> list[str]:
        """The call inside a transaction that is always rolled back."""
        if self.o.protocol == "simple":
            # One query string, one round trip (\; keeps pgbench from splitting it).
            return [f"BEGIN \\; {call} \\; ROLLBACK;"]
        # The extended protocol takes one statement per message: three round trips,
        # for about 0.45% of transactions.
        return ["BEGIN;", call + ";", "ROLLBACK;"]

    def _payment(self) -> list[str]:
        draw = (f"tprocc_draw_payment(:w_id, {self._district()}, {self.w}, {self.c.c_id}, "
                f"{self.c.c_last}, {self._remote_pct(self.o.remote_payment_pct)}, "
                f"{self.o.by_name_pct:g})")
        return ["SELECT tprocc_payment(:w_id, p.d_id, p.c_w_id, p.c_d_id, p.c_id, p.c_last, "
                f"p.amount_cents) FROM {draw} AS p;"]

    def _order_status(self) -> list[str]:
        draw = (f"tprocc_draw_order_status({self._district()}, {self.c.c_id}, "
                f"{self.c.c_last}, {self.o.by_name_pct:g})")
        return ["SELECT tprocc_order_status(:w_id, s.d_id, s.c_id, s.c_last) "
                f"FROM {draw} AS s;"]

    def _delivery(self) -> list[str]:
        return ["SELECT tprocc_delivery(:w_id, tprocc_random(1, 10));"]

    def _stock_level(self) -> list[str]:
        # Stock-Level always runs for the terminal's own district (clause 2.8.1.2).
        return ["SELECT tprocc_stock_level(:w_id, :home_d_id, tprocc_random(10, 20));"]
