"""The search space, without a server: memory budget, durability, pins, narrowing; and the
selection on repeated measurements against a synthetic objective (known optimum + noise)."""

from __future__ import annotations

import random

import optuna
import pytest

from pgdyno.config.hardware import HardwareProfile
from pgdyno.config.setting_specs import snapshot, unquote
from pgdyno.config.units import GB, MB
from pgdyno.errors import UsageError
from pgdyno.search.select import Candidate, balanced_order, plan_selection, run_selection
from pgdyno.search.space import UNSAFE, build_space
from pgdyno.search.study import INTERRUPTED, open_study, recover_interrupted, rows

CAT = snapshot(18)


def _hw(ram_gb: float, cpus: int = 2) -> HardwareProfile:
    return HardwareProfile(name="t", vcpus=cpus, ram_bytes=int(ram_gb * GB))


def _budget_by_hand(s: dict[str, str], ram: int) -> tuple[int, int]:
    """The worst case recomputed here from the values, independently of the space."""
    def b(key: str, default: str) -> int:
        return CAT.to_bytes(key, s.get(key, default))

    shared = b("shared_buffers", "128MB")
    wal = s.get("wal_buffers", "-1")
    wal_b = min(shared // 32, 16 * MB) if wal == "-1" else CAT.to_bytes("wal_buffers", wal)
    conns = int(s["max_connections"])
    av_workers = int(CAT.default("autovacuum_max_workers"))
    mwm = b("maintenance_work_mem", "64MB")
    total = shared + max(wal_b, 64 * 1024) + conns * b("work_mem", "4MB") * 1.5 \
        + av_workers * mwm + mwm
    return int(total), int(ram * 0.9)


@pytest.mark.parametrize(("ram_gb", "clients", "knobs"), [
    (24, 2, None), (2, 100, ["all"]), (256, 500, None), (1, 8, ["all"])])
def test_no_sampled_config_exceeds_the_memory_budget(ram_gb: float, clients: int,
                                                     knobs: list[str] | None) -> None:
    space = build_space(_hw(ram_gb), CAT, clients=clients, write_heavy=True, knobs=knobs)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=ram_gb * 7))
    corner_hits = 0
    for _ in range(400):
        trial = study.ask()
        settings = space.suggest(trial)
        total, limit = _budget_by_hand(settings, space.ram_bytes)
        assert total <= limit, (settings, total, limit)
        assert space.memory_bytes(settings) <= space.budget_bytes
        for key, value in settings.items():
            assert CAT.check(key, value, "test") is not None  # every value is valid
        corner_hits += total > 0.5 * limit
        study.tell(trial, 1.0)
    # The space is not trivially small: memory reaches a real share of the budget. The
    # sampler's seed is fixed, so the draws past half of it are the same every time.
    assert space.knob("shared_buffers").high * MB >= 0.3 * space.ram_bytes
    assert corner_hits > 0, "no sampled config needs half the memory budget"


def test_special_values_are_sampled_on_purpose() -> None:
    space = build_space(_hw(8), CAT, clients=4, write_heavy=True)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    seen: dict[str, set[str]] = {}
    for _ in range(200):
        trial = study.ask()
        for key, value in space.suggest(trial).items():
            seen.setdefault(key, set()).add(value)
        study.tell(trial, 0.0)
    assert "-1" in seen["wal_buffers"] and "0" in seen["commit_delay"]
    assert "0" in seen["bgwriter_lru_maxpages"] and "-1" in seen["autovacuum_vacuum_cost_limit"]
    sizes = sorted(int(v.removesuffix("MB")) for v in seen["shared_buffers"])
    # log-scaled: as many draws below the geometric middle as above it, roughly
    knob = space.knob("shared_buffers")
    middle = (knob.low * knob.high) ** 0.5
    below = sum(v < middle for v in sizes) / len(sizes)
    assert 0.3 < below < 0.7


def test_durability_settings_are_never_touched_without_allow_unsafe() -> None:
    for knobs in (None, ["all"]):
        space = build_space(_hw(16), CAT, clients=8, write_heavy=True, knobs=knobs)
        assert not {k.name for k in space.knobs} & set(UNSAFE)
        study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
        for _ in range(100):
            trial = study.ask()
            assert not set(space.suggest(trial)) & set(UNSAFE)
            study.tell(trial, 0.0)
    for bad in (dict(knobs=["fsync"]), dict(fixes=["synchronous_commit=off"]),
                dict(knobs=["wal_level"])):
        with pytest.raises(UsageError, match="--allow-unsafe"):
            build_space(_hw(16), CAT, clients=8, write_heavy=True, **bad)
    unsafe = build_space(_hw(16), CAT, clients=8, write_heavy=True, allow_unsafe=True)
    assert set(UNSAFE) <= {k.name for k in unsafe.knobs}
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=4))
    for _ in range(50):
        trial = study.ask()
        s = unsafe.suggest(trial)
        if s["wal_level"] == "minimal":
            assert s["max_wal_senders"] == "0"  # or the server refuses to start
        study.tell(trial, 0.0)


def test_knobs_narrow_and_fix_pins() -> None:
    space = build_space(_hw(16), CAT, clients=8, write_heavy=True,
                        knobs=["shared_buffers", "work_mem"], fixes=["work_mem=8MB",
                                                                     "max_wal_size=4GB"])
    assert [k.name for k in space.knobs] == ["shared_buffers"]
    trial = optuna.create_study().ask()
    s = space.suggest(trial)
    assert unquote(s["work_mem"]) == "8MB" and unquote(s["max_wal_size"]) == "4GB"
    assert s["max_connections"] == "26"  # 8 clients + 15 pgdyno sessions + 3 reserved
    with pytest.raises(UsageError, match="--knobs nosuch"):
        build_space(_hw(16), CAT, clients=8, write_heavy=True, knobs=["nosuch"])
    with pytest.raises(UsageError, match="--fix work_mem"):
        build_space(_hw(16), CAT, clients=8, write_heavy=True, fixes=["work_mem=lots"])
    # A pinned shared_buffers takes its share first: work_mem's ceiling shrinks.
    big = build_space(_hw(16), CAT, clients=8, write_heavy=True, fixes=["shared_buffers=12GB"])
    free = build_space(_hw(16), CAT, clients=8, write_heavy=True)
    assert big.knob("work_mem").high < free.knob("work_mem").high


def test_interrupted_trial_is_failed_and_queued_again(tmp_path) -> None:
    space = build_space(_hw(8), CAT, clients=2, write_heavy=True)
    study = open_study(tmp_path, "maximize", 0)
    done = study.ask()
    space.suggest(done)
    study.tell(done, 10.0)
    left = study.ask()  # a process stopped while this one ran
    params = dict(space.suggest(left) and left.params)
    again = open_study(tmp_path, "maximize", 0)
    assert recover_interrupted(again) == [1]
    assert [r.number for r in rows(again)] == [0]  # the interrupted one is not "finished"
    assert again.trials[1].user_attrs["reason"] == INTERRUPTED
    nxt = again.ask()
    assert space.suggest(nxt) and nxt.params == params


# ----- selection on repeated measurements --------------------------------------------------

def _one_search(rng: random.Random, n: int, noise: float) -> tuple[bool, bool]:
    """n configs with known true values; one noisy trial each; then the selection."""
    true = [rng.gauss(100, 4) for _ in range(n)]
    best = max(range(n), key=true.__getitem__)
    cands = [Candidate(key=str(i), label=f"c{i}", config=f"c{i}",
                       values=[true[i] + rng.gauss(0, noise)]) for i in range(n)]
    single = max(cands, key=lambda c: c.values[0])
    selection = plan_selection(cands, k=4, reruns=3, direction=1)

    def measure(c: Candidate) -> tuple[float, str, str]:
        return true[int(c.key)] + rng.gauss(0, noise), "", ""

    chosen = run_selection(selection, measure)
    return int(single.key) == best, int(chosen.key) == best


def test_selection_finds_the_true_best_more_often_than_the_best_single_trial() -> None:
    rng = random.Random(20240518)
    reps = 600
    single_hits = chosen_hits = 0
    for _ in range(reps):
        s, c = _one_search(rng, n=20, noise=4.0)
        single_hits += s
        chosen_hits += c
    # With noise as large as the spread of the configs, one trial often crowns a lucky one.
    assert chosen_hits > single_hits * 1.2, (chosen_hits, single_hits)
    assert chosen_hits / reps > 0.4


def test_balanced_order_is_abba() -> None:
    assert balanced_order(["W", "P", "T"], 3) == ["W", "P", "T", "T", "P", "W", "W", "P", "T"]
    assert balanced_order(["A", "B"], 2) == ["A", "B", "B", "A"]


def test_setting_importance_ranks_the_setting_that_matters() -> None:
    """PED-ANOVA over searched trials (no scikit-learn needed): a figure that depends on one
    setting only puts that setting first; the other is noise."""
    import random

    import optuna

    from pgdyno.search.report_data import setting_importance

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(1))
    noise = random.Random(2)
    for _ in range(20):
        trial = study.ask()
        x = trial.suggest_float("shared_buffers", 1.0, 100.0, log=True)
        trial.suggest_float("work_mem", 1.0, 100.0, log=True)
        study.tell(trial, 1000.0 * x + noise.random())
    ranked, method = setting_importance(study, [])
    assert ranked[0][0] == "shared_buffers" and ranked[0][1] > 0.5, ranked
    assert "PED-ANOVA" in method and "20 searched trials" in method
