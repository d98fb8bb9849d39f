"""Fuzz cases for conformal-decision-sets' exported callables (see tests/test_fuzz_api.py)."""

import numpy as np

from icml24.conformal import conformal_decision_sets as cds

P = np.array([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.3, 0.3, 0.4], [0.5, 0.25, 0.25], [0.2, 0.5, 0.3]] * 4)
Y = np.array([0, 1, 2, 1, 1] * 4)
TABLE = {"task": ["t"] * 6, "arm": ["conformal"] * 3 + ["topk"] * 3, "correct": [8.0, 9.0, 7.0, 6.0, 5.0, 7.0],
         "n_items": [10.0] * 6}
SETS = cds.topk_sets(P, 2)
BAD_PROBS = [np.array([[0.5, 0.6, 0.1]] * 20), np.ones(3), np.full((20, 3), np.nan)]

FUZZ_CASES = [
    dict(fn=cds.temperature_softmax, args=(np.log(P),), kwargs={"temperature": 0.3},
         invalid={"logits": [np.ones(3), np.array([["a"]])], "temperature": [0.0, -1.0, "x", None]}),
    dict(fn=cds.topk_sets, args=(P, 2), invalid={"probs": BAD_PROBS, "k": [0, 4, 1.5, "2", True]}),
    dict(fn=cds.topk_coverage, args=(P, Y, 2), invalid={"labels": [np.arange(20) + 5], "k": [0, 9]}),
    dict(fn=cds.smallest_k_for_alpha, args=(P, Y, 0.2), invalid={"alpha": [0.0, 1.0, "x"], "probs": BAD_PROBS}),
    dict(fn=cds.display_order, args=(SETS,), invalid={"sets": [np.ones(3), np.array([[2, 0, 1]]),
                                                             np.array([["a", "b"]])]}),
    dict(fn=cds.CoverageMatchedSets("precomputed", k=1, random_state=0).fit, args=(P, Y),
         invalid={"X": BAD_PROBS, "y": [np.arange(20)]}, covers=(cds.CoverageMatchedSets,)),
    dict(fn=cds.participant_accuracy, args=(TABLE,),
         invalid={"table": [{"task": ["t"]}, {**TABLE, "correct": [np.nan] * 6}, {**TABLE, "n_items": [0.0] * 6}, 3]}),
    dict(fn=cds.arm_summaries, args=(TABLE,), invalid={"confidence": [0.0, 1.0, "x", float("nan")]}),
    dict(fn=cds.compare_arms, args=(TABLE, "t"),
         invalid={"task": ["nope"], "arm_a": ["nope"], "alternative": ["bigger", None]}),
    dict(fn=cds.human_knowledge, args=(P, np.ones(20), 0.5, np.random.default_rng(0)),
         invalid={"q": [np.ones(3), BAD_PROBS[0]], "skill": [-np.ones(20), np.ones(3)],
                  "noise_sd": [-1.0, "x"], "rng": [None, 3]}),
    dict(fn=cds.decide, args=(P, SETS, 0.9, "bayes", np.random.default_rng(0)),
         invalid={"knowledge": [np.ones(3), -P], "sets": [np.ones((2, 2), bool)], "coverage": [-0.1, 1.5, "x"],
                  "rule": ["guess"], "rng": [None], "anchor_prob": [-0.1, 2.0], "max_size": [0, 1.5]}),
    dict(fn=cds.HumanModel, kwargs={"rule": "bayes"},
         invalid={"rule": ["guess"], "skill_low": [-1.0, "x"], "skill_high": [-2.0], "noise_sd": [-1.0],
                  "anchor_prob": [1.5], "max_size": [0, 2.5]}),
    dict(fn=cds.simulate_trial, kwargs={"weak_probs": P, "labels": Y, "arms": {"topk": (SETS, 0.9)},
                                        "human": cds.HumanModel(), "n_participants": 3, "n_items": 5,
                                        "rng": np.random.default_rng(0)},
         invalid={"weak_probs": BAD_PROBS, "n_items": [0, 21, 2.5], "n_participants": [0, "3"],
                  "arms": [{"topk": (np.ones((2, 2)), 0.9)}, {"topk": (SETS, 1.5)}, 3], "human": [None],
                  "rng": [None, 0]}),
    dict(fn=cds.find_trial_folder, args=(None,), invalid={"path": [3, 1.5], "bundled": ["yes", None]}),
    dict(fn=cds.load_trial_results, args=(None,), invalid={"folder": [3, 2.5]}),
]

EXEMPT = {
    "ArmSummary": "a result record returned by arm_summaries",
    "WelchResult": "a result record returned by compare_arms",
}
