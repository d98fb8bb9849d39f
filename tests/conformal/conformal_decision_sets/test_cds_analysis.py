"""The trial's statistics over response tables, and the re-analysis of the released data."""

import numpy as np
import pytest
from scipy import stats

from icml24.conformal.conformal_decision_sets import (
    N_QUESTIONS,
    arm_summaries,
    compare_arms,
    find_trial_folder,
    load_trial_results,
    participant_accuracy,
)


def _table():
    # two arms, 3 participants each, per-participant counts out of 10
    return {
        "task": ["t"] * 6,
        "arm": ["conformal"] * 3 + ["topk"] * 3,
        "participant": [1, 2, 3, 4, 5, 6],
        "correct": [9, 8, 10, 6, 7, 8],
        "n_items": [10] * 6,
    }


def test_welch_hand_computed():
    r = compare_arms(_table(), "t")
    a, b = np.array([0.9, 0.8, 1.0]), np.array([0.6, 0.7, 0.8])
    se = np.sqrt(a.var(ddof=1) / 3 + b.var(ddof=1) / 3)  # = sqrt(0.01/3 + 0.01/3)
    assert r.mean_diff == pytest.approx(0.2)
    assert r.t == pytest.approx(0.2 / se)
    assert r.df == pytest.approx(4.0)  # equal variances and sizes: df = 2 (n - 1)
    assert r.p_welch == pytest.approx(stats.t.sf(0.2 / se, 4.0))
    assert r.cohen_d == pytest.approx(2.0)


def test_ci_closed_form():
    s = {x.arm: x for x in arm_summaries(_table(), confidence=0.9)}["conformal"]
    half = stats.t.ppf(0.95, 2) * 0.1 / np.sqrt(3)
    assert (s.mean, s.sd) == pytest.approx((0.9, 0.1))
    assert (s.ci_low, s.ci_high) == pytest.approx((0.9 - half, 0.9 + half))


def test_per_item_rows_equal_per_participant_counts():
    rng = np.random.default_rng(0)
    rows = {"task": [], "arm": [], "participant": [], "correct": [], "set_size": []}
    counts = {"task": [], "arm": [], "participant": [], "correct": [], "n_items": []}
    for pid in range(20):
        arm = "conformal" if pid % 2 else "topk"
        ans = rng.random(30) < (0.8 if arm == "conformal" else 0.7)
        rows["task"] += ["x"] * 30
        rows["arm"] += [arm] * 30
        rows["participant"] += [pid] * 30
        rows["correct"] += ans.astype(int).tolist()
        rows["set_size"] += rng.integers(1, 4, 30).tolist()
        counts["task"].append("x")
        counts["arm"].append(arm)
        counts["participant"].append(pid)
        counts["correct"].append(int(ans.sum()))
        counts["n_items"].append(30)
    a, b = compare_arms(rows, "x"), compare_arms(counts, "x")
    assert a.p_welch == pytest.approx(b.p_welch) and a.t == pytest.approx(b.t)
    acc = participant_accuracy(rows)
    assert set(acc) == {("x", "conformal"), ("x", "topk")} and acc[("x", "topk")].size == 10
    sizes = {s.arm: s.mean_set_size for s in arm_summaries(rows)}
    assert 1 <= sizes["conformal"] <= 3
    # a list of records works too
    records = [dict(zip(rows, vals)) for vals in zip(*rows.values())]
    assert compare_arms(records, "x").p_welch == pytest.approx(a.p_welch)


def test_bad_tables():
    with pytest.raises(ValueError, match="missing columns"):
        compare_arms({"task": ["t"], "arm": ["a"]}, "t")
    with pytest.raises(ValueError, match="no responses"):
        compare_arms(_table(), "t", "conformal", "control")
    bad = _table()
    bad["correct"] = [11, 8, 10, 6, 7, 8]
    with pytest.raises(ValueError, match="correct"):
        compare_arms(bad, "t")
    with pytest.raises(ValueError, match="alternative"):
        compare_arms(_table(), "t", alternative="bigger")
    short = {k: v[:4] for k, v in _table().items()}
    with pytest.raises(ValueError, match="at least 2"):
        compare_arms(short, "t")


def test_loader_reads_a_folder(tmp_path):
    (tmp_path / "few-nerd.csv").write_text(
        "participant_id,experiment,num_correct,time,Age,Sex\n1,topk,30,100.0,30,Male\n2,conformal,40,90.5,40,Female\n"
    )
    assert find_trial_folder(tmp_path) == tmp_path.resolve()
    t = load_trial_results(tmp_path)
    assert t["arm"].tolist() == ["topk", "conformal"]
    assert t["correct"].tolist() == [30.0, 40.0] and t["n_items"].tolist() == [50.0, 50.0]
    (tmp_path / "few-nerd.csv").write_text("id,arm\n1,topk\n")
    with pytest.raises(ValueError, match="columns"):
        load_trial_results(tmp_path)


def test_find_trial_folder_absent_and_bundled(tmp_path, monkeypatch):
    from icml24.conformal.conformal_decision_sets.trial_data import BUNDLED_DATA

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ICML24_HITL_DATA", raising=False)
    with pytest.raises(FileNotFoundError, match="path"):
        find_trial_folder(tmp_path / "nope")  # a wrong folder the user named is an error, not a fallback
    assert find_trial_folder(None) == BUNDLED_DATA
    assert find_trial_folder(None, bundled=False) is None
    assert (BUNDLED_DATA / "LICENSE").is_file() and (BUNDLED_DATA / "ATTRIBUTION.md").is_file()
    monkeypatch.setenv("ICML24_HITL_DATA", str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match="ICML24_HITL_DATA"):
        find_trial_folder(None)
    with pytest.raises(TypeError, match="path"):
        find_trial_folder(3)


# The released trial results (MIT): reproduce the notes' table to 2 decimals when the folder is available.
EXPECTED = {  # task: (topk mean, topk sd, conformal mean, conformal sd, one-sided Welch p)
    "go-emotions": (27.68, 4.46, 29.56, 4.26, 0.017),
    "object-net": (86.04, 5.77, 88.42, 4.08, 0.010),
    "few-nerd": (37.88, 5.43, 40.76, 3.01, 0.0008),
}


def test_reanalysis_of_the_real_trial():
    table = load_trial_results(find_trial_folder(None, bundled=True))
    summ = {(s.task, s.arm): s for s in arm_summaries(table)}
    for task, (tm, tsd, cm, csd, p) in EXPECTED.items():
        n_q = N_QUESTIONS[task]
        assert round(summ[(task, "topk")].mean * n_q, 2) == tm
        assert round(summ[(task, "topk")].sd * n_q, 2) == tsd
        assert round(summ[(task, "conformal")].mean * n_q, 2) == cm
        assert round(summ[(task, "conformal")].sd * n_q, 2) == csd
        r = compare_arms(table, task)
        assert r.p_welch == pytest.approx(p, abs=0.0005 if p < 0.001 else 0.0015)
        assert summ[(task, "conformal")].n == 50


@pytest.mark.parametrize(
    "alternative,a_wins,b_wins,tie", [("greater", 0.0, 1.0, 1.0), ("less", 1.0, 0.0, 1.0), ("two-sided", 0.0, 0.0, 1.0)]
)
def test_constant_arms_p_value_follows_the_alternative(alternative, a_wins, b_wins, tie):
    def table(ca, cb):
        return {"task": ["t"] * 4, "arm": ["conformal"] * 2 + ["topk"] * 2, "participant": [1, 2, 3, 4],
                "correct": [ca, ca, cb, cb], "n_items": [10] * 4}

    assert compare_arms(table(9, 7), "t", alternative=alternative).p_welch == a_wins
    assert compare_arms(table(7, 9), "t", alternative=alternative).p_welch == b_wins
    assert compare_arms(table(8, 8), "t", alternative=alternative).p_welch == tie
