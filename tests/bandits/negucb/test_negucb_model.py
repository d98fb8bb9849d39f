"""NegUCB's pieces: domains, environment, hidden state, kernel posterior, candidate pool and agents."""

from __future__ import annotations

import numpy as np
import pytest

from icml24.bandits.negucb import (
    AllocationDomain,
    EpsilonGreedy,
    HiddenState,
    LinearUCB,
    MultiIssueDomain,
    NegotiationEnv,
    NegUCB,
    Observation,
    OracleBidder,
    RandomBidder,
    RandomFourierFeatures,
    RidgePosterior,
    TimeDependentTactic,
    TradingDomain,
    kernel_ridge_posterior,
    simulate,
)

DOMAINS = [MultiIssueDomain(n_issues=3, n_values=4), TradingDomain(n_levels=20), AllocationDomain(counts=(2, 3, 1))]


@pytest.mark.parametrize("domain", DOMAINS, ids=lambda d: d.name)
def test_domains_enumerate_every_feasible_bid_with_utilities_in_unit_interval(domain) -> None:
    n = domain.n_bids
    assert domain.points.shape[0] == n == int(np.prod(domain.sizes))
    assert len({tuple(p) for p in domain.points}) == n  # all distinct
    assert (domain.encodings >= 0).all() and (domain.encodings <= 1).all()
    own, prof = domain.sample_utilities(4, np.random.default_rng(0))
    assert own.shape == (4, n) and prof.shape == (4, 2, n)
    assert own.min() >= 0 and own.max() <= 1 and prof.min() >= 0 and prof.max() <= 1


@pytest.mark.parametrize("domain", DOMAINS, ids=lambda d: d.name)
def test_neighbours_differ_in_exactly_one_coordinate(domain) -> None:
    nb = domain.neighbours
    for b in range(domain.n_bids):
        for j in nb[b][nb[b] >= 0]:
            diff = domain.points[b] != domain.points[j]
            assert diff.sum() == 1


def test_multi_issue_utility_is_not_additive() -> None:
    """With the interaction term the own utility has no exact additive fit over the one-hot encoding."""
    d = MultiIssueDomain(n_issues=3, n_values=4, interaction=0.3)
    own, _ = d.sample_utilities(1, np.random.default_rng(1))
    x = np.concatenate([np.ones((d.n_bids, 1)), d.encodings], axis=1)
    resid = own[0] - x @ np.linalg.lstsq(x, own[0], rcond=None)[0]
    assert np.abs(resid).max() > 1e-3
    own0, _ = MultiIssueDomain(n_issues=3, n_values=4, interaction=0.0).sample_utilities(1, np.random.default_rng(1))
    assert np.abs(own0[0] - x @ np.linalg.lstsq(x, own0[0], rcond=None)[0]).max() < 1e-9


def test_allocation_utilities_are_shares() -> None:
    d = AllocationDomain(counts=(2, 3))
    own, prof = d.sample_utilities(2, np.random.default_rng(0))
    everything = np.flatnonzero((d.points == [2, 3]).all(axis=1))[0]
    nothing = np.flatnonzero((d.points == [0, 0]).all(axis=1))[0]
    np.testing.assert_allclose(own[:, everything], 1.0)
    np.testing.assert_allclose(own[:, nothing], 0.0)
    np.testing.assert_allclose(prof[:, :, everything], 0.0)


def test_threshold_follows_the_concession_curve() -> None:
    env = NegotiationEnv(TradingDomain(n_levels=10), types=((0.5, 0.2), (2.0, 0.4)), episode_length=10,
                         theta_start=0.9)  # fmt: skip
    env.reset(2, 5, seed=0)
    env.type_ = np.array([0, 1])
    s = np.array([5, 5])
    expected = [0.9 - 0.7 * 0.5**2, 0.9 - 0.5 * 0.5**0.5]
    np.testing.assert_allclose(env.threshold(s), expected)
    np.testing.assert_allclose(env.threshold(np.zeros(2, int)), 0.9)


def test_oracle_has_zero_regret_and_every_regret_is_non_negative() -> None:
    env = NegotiationEnv(MultiIssueDomain(n_issues=2, n_values=3))
    assert np.all(simulate(env, OracleBidder(), 200, 3, seed=0).regret == 0)
    for agent in (RandomBidder(), TimeDependentTactic(exponent=0.2), NegUCB(n_features=32)):
        assert simulate(env, agent, 100, 3, seed=0).regret.min() >= -1e-12


def test_episodes_end_at_a_deal_or_the_deadline_and_the_books_balance() -> None:
    env = NegotiationEnv(TradingDomain(n_levels=10), episode_length=4)
    run = simulate(env, TimeDependentTactic(exponent=0.2), 60, 3, seed=1)
    accepted = run.reward > 0
    np.testing.assert_array_equal(run.deals, accepted.sum(axis=1))  # every proposal with a reward was a deal
    np.testing.assert_allclose(run.deal_utility, run.reward.sum(axis=1))
    assert (run.episodes >= run.deals).all() and (run.episodes <= 60).all()
    assert (run.episodes >= (60 // 4) - 1).all()  # no negotiation runs past its 4 proposals


def test_same_seed_same_opponents_for_every_agent() -> None:
    env = NegotiationEnv(MultiIssueDomain(n_issues=2, n_values=3))
    env.reset(3, 50, seed=4)
    stream = env._type_stream.copy(), env._uniforms.copy(), env.own_utility_.copy()
    simulate(env, RandomBidder(), 50, 3, seed=4)
    for a, b in zip(stream, (env._type_stream, env._uniforms, env.own_utility_)):
        np.testing.assert_array_equal(a, b)
    r1 = simulate(env, NegUCB(n_features=16), 80, 2, seed=3)
    r2 = simulate(env, NegUCB(n_features=16), 80, 2, seed=3)
    np.testing.assert_array_equal(r1.regret, r2.regret)


def test_counter_offer_is_acceptable_to_the_opponent_next_step() -> None:
    env = NegotiationEnv(MultiIssueDomain(n_issues=3, n_values=4))
    env.reset(5, 30, seed=0)
    for _ in range(10):
        before = env.step_.copy()
        nxt = env.threshold(env.step_ + 1)
        _, _, _, obs = env.step(np.zeros(5, dtype=np.intp))
        cont = ~obs.new_episode
        util = env._opp_utility[np.arange(5), np.maximum(obs.counter, 0)]
        feasible = (env._opp_utility >= nxt[:, None]).any(axis=1)
        assert np.all(util[cont & feasible] >= nxt[cont & feasible] - 1e-12)
        assert np.all(obs.counter[~cont] == -1) and np.all(env.step_[cont] == before[cont] + 1)


# -- hidden state ------------------------------------------------------------------------------------------


def _obs(counter, new, t=0.0):
    n = len(counter)
    return Observation(np.full(n, t), np.zeros(n), np.asarray(counter), np.asarray(new))


def test_hidden_state_uses_only_the_past() -> None:
    """Leakage test: the features at step t are the same whatever happens after t."""
    own = np.random.default_rng(0).uniform(size=(1, 10))
    past = [_obs([-1], [True]), _obs([3], [False]), _obs([5], [False])]
    futures = ([_obs([7], [False]), _obs([-1], [True])], [_obs([1], [False]), _obs([2], [False])])
    runs = []
    for fut in futures:
        tracker = HiddenState().reset(1)
        runs.append([tracker.update(o, own).copy() for o in past + fut][: len(past)])
    np.testing.assert_array_equal(np.array(runs[0]), np.array(runs[1]))
    h = runs[0]
    np.testing.assert_allclose(h[0], [[0, 0, 0]])
    np.testing.assert_allclose(h[1], [[1, own[0, 3], 0]])
    np.testing.assert_allclose(h[2], [[1, own[0, 5], own[0, 5] - own[0, 3]]])


def test_hidden_state_resets_with_a_new_opponent() -> None:
    own = np.linspace(0, 1, 10)[None, :]
    tracker = HiddenState().reset(1)
    for o in (_obs([-1], [True]), _obs([2], [False]), _obs([8], [False]), _obs([-1], [True]), _obs([4], [False])):
        h = tracker.update(o, own)
    np.testing.assert_allclose(h, [[1, own[0, 4], 0]])


# -- kernel regression -------------------------------------------------------------------------------------


def test_krr_matches_the_gp_posterior_mean_and_variance() -> None:
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF

    rng = np.random.default_rng(0)
    x, q = rng.uniform(size=(30, 3)), rng.uniform(size=(7, 3))
    y = (x.sum(1) > 1.5).astype(float)
    mu, sd = kernel_ridge_posterior(x, y, q, lengthscales=0.4, lam=0.5)
    gp = GaussianProcessRegressor(RBF(0.4), alpha=0.5, optimizer=None).fit(x, y)
    g_mu, g_sd = gp.predict(q, return_std=True)
    np.testing.assert_allclose(mu, g_mu, atol=1e-10)
    np.testing.assert_allclose(sd, g_sd, atol=1e-8)


def test_variance_is_non_increasing_as_data_arrive_and_non_negative() -> None:
    rng = np.random.default_rng(1)
    x, q = rng.uniform(size=(40, 2)), rng.uniform(size=(5, 2))
    y = rng.integers(0, 2, 40).astype(float)
    sds = np.array([kernel_ridge_posterior(x[:t], y[:t], q, lengthscales=0.3)[1] for t in range(1, 41)])
    assert (sds >= 0).all() and (np.diff(sds, axis=0) <= 1e-12).all()
    post = RidgePosterior(1, 8, 1.0)
    phi = rng.standard_normal((5, 1, 3, 8))
    prev = post.sd(phi[0])
    for t in range(1, 5):
        post.update(phi[t - 1][:, 0], np.ones(1))
        cur = post.sd(phi[0])
        assert (cur <= prev + 1e-12).all()
        prev = cur


def test_random_features_converge_to_the_exact_kernel_posterior() -> None:
    rng = np.random.default_rng(2)
    x, q = rng.uniform(size=(25, 3)), rng.uniform(size=(6, 3))
    y = np.sin(3 * x[:, 0]) + x[:, 1]
    mu, sd = kernel_ridge_posterior(x, y, q, lengthscales=0.5, lam=1.0)
    errs = []
    for d in (64, 4096):
        rff = RandomFourierFeatures(d, np.full(3, 0.5), seed=0).bind(1, x[:, 1:])

        def phi(z, r=rff):
            return r.scale * np.cos(z @ r.weights + r.offset)

        post = RidgePosterior(1, d, 1.0)
        for i in range(x.shape[0]):
            post.update(phi(x[i : i + 1]), y[i : i + 1])
        pq = phi(q)[None]
        errs.append(max(np.abs(post.mean(pq)[0] - mu).max(), np.abs(post.sd(pq)[0] - sd).max()))
    assert errs[1] < 0.05 and errs[1] < errs[0]


def test_ridge_update_equals_the_batch_solution() -> None:
    rng = np.random.default_rng(3)
    phi, y = rng.standard_normal((20, 5)), rng.standard_normal(20)
    post = RidgePosterior(1, 5, 0.7)
    for i in range(20):
        post.update(phi[i : i + 1], y[i : i + 1])
    theta = np.linalg.solve(0.7 * np.eye(5) + phi.T @ phi, phi.T @ y)
    np.testing.assert_allclose(post.theta[0], theta, atol=1e-10)


# -- agents ------------------------------------------------------------------------------------------------


def test_beta_zero_is_greedy_kernel_regression() -> None:
    """NegUCB with beta = 0 and EpsilonGreedy with epsilon = 0 make identical proposals."""
    env = NegotiationEnv(MultiIssueDomain(n_issues=2, n_values=3))
    a = simulate(env, NegUCB(beta=0.0, n_features=32), 120, 2, seed=0)
    b = simulate(env, EpsilonGreedy(epsilon=0.0, n_features=32, lengthscale_state=1.0), 120, 2, seed=0)
    np.testing.assert_array_equal(a.regret, b.regret)


def test_linear_ucb_is_negucb_with_linear_features() -> None:
    env = NegotiationEnv(TradingDomain(n_levels=10))
    a = simulate(env, LinearUCB(beta=0.5), 100, 2, seed=0)
    b = simulate(env, NegUCB(beta=0.5, features="linear"), 100, 2, seed=0)
    np.testing.assert_array_equal(a.regret, b.regret)


def test_exhaustive_scoring_equals_brute_force() -> None:
    env = NegotiationEnv(MultiIssueDomain(n_issues=2, n_values=3))
    obs = env.reset(3, 10, seed=0)
    agent = NegUCB(n_features=16).reset(env)
    bids = agent.select(obs)
    state = agent._state
    brute = np.stack([agent.scores(state, np.full((3, 1), b))[:, 0] for b in range(9)], axis=1)
    np.testing.assert_array_equal(bids, brute.argmax(axis=1))


def test_candidate_pool_is_feasible_and_finds_the_exhaustive_choice_on_a_smooth_score() -> None:
    """On a 4096-bid domain the pool plus local search reaches the brute-force argmax of the UCB score when
    the score is the own utility (no data yet, beta large): the top-M part of the pool contains it."""
    env = NegotiationEnv(MultiIssueDomain(n_issues=6, n_values=4))
    obs = env.reset(3, 5, seed=0)
    agent = NegUCB(n_features=32, exhaustive_limit=100, beta=10.0).reset(env)
    assert not agent.exhaustive_
    bids = agent.select(obs)
    assert bids.min() >= 0 and bids.max() < env.domain.n_bids
    np.testing.assert_array_equal(bids, env.own_utility_.argmax(axis=1))
    pool = agent.candidates()
    assert pool.min() >= 0 and pool.max() < env.domain.n_bids


def test_pool_local_search_never_lowers_the_score() -> None:
    env = NegotiationEnv(MultiIssueDomain(n_issues=5, n_values=4))
    obs = env.reset(4, 60, seed=1)
    agent = NegUCB(n_features=32, exhaustive_limit=10, pool_top=4, pool_random=4, local_steps=3).reset(env)
    for _ in range(30):  # give the model some data so the score is not just U
        bids = agent.select(obs)
        acc, _, _, nxt = env.step(bids)
        agent.update(obs, bids, acc)
        obs = nxt
    pool = agent.candidates()
    bids = agent.select(obs)
    chosen = agent.scores(agent._state, bids[:, None])[:, 0]
    assert (chosen >= agent.scores(agent._state, pool).max(axis=1) - 1e-12).all()


def test_time_dependent_tactic_concedes_over_time() -> None:
    env = NegotiationEnv(MultiIssueDomain(n_issues=3, n_values=4), episode_length=10)
    env.reset(2, 5, seed=0)
    agent = TimeDependentTactic(exponent=1.0, floor=0.3).reset(env)
    utils = []
    for s in range(10):
        obs = Observation(np.full(2, s / 10), np.zeros(2), np.full(2, -1), np.zeros(2, bool))
        b = agent.select(obs)
        u = env.own_utility_[np.arange(2), b]
        assert (u >= 1 - 0.7 * s / 10 - 1e-12).all()
        utils.append(u)
    assert (np.diff(np.array(utils), axis=0) <= 1e-12).all()
    np.testing.assert_allclose(utils[0], 1.0)


def test_negucb_learns_a_stationary_opponent_with_sublinear_regret() -> None:
    """One opponent type (g a function of the observed context and the bid): the regret's log-log slope is
    below 1 and its last-quarter rate is well below its first-quarter rate."""
    from icml24.bandits.regret import loglog_slope

    env = NegotiationEnv(MultiIssueDomain(n_issues=2, n_values=4), types=((1.0, 0.3),))
    run = simulate(env, NegUCB(beta=0.3), 1200, 4, seed=0)
    rand = simulate(env, RandomBidder(), 1200, 4, seed=0)
    assert loglog_slope(run.cumulative.mean(axis=0)) < 0.9
    q = run.regret.shape[1] // 4
    assert run.regret[:, -q:].mean() < 0.6 * run.regret[:, :q].mean()
    assert run.final.mean() < 0.6 * rand.final.mean()


def test_sum_features_give_the_sum_of_the_two_kernels() -> None:
    from icml24.bandits.negucb.model import LinearFeatures, SumFeatures

    enc = np.eye(4)
    rff = RandomFourierFeatures(16, np.ones(6), seed=0)
    lin = LinearFeatures()
    both = SumFeatures(rff, lin).bind(2, enc)
    state = np.array([[0.1, 0.5], [0.7, 0.2]])
    bids = np.array([[0, 3], [1, 2]])
    phi = both(state, bids)
    assert phi.shape == (2, 2, 16 + 2 + 5) and both.dim == 23
    k_sum = np.einsum("nmd,nkd->nmk", phi, phi)
    k_parts = sum(np.einsum("nmd,nkd->nmk", f, f) for f in (rff(state, bids), lin(state, bids)))
    np.testing.assert_allclose(k_sum, k_parts)
    assert NegUCB().features == "rff+linear"


# -- the window rule's statistic -------------------------------------------------------------------------------


def test_window_means_tell_linear_from_sublinear_regret() -> None:
    from icml24.bandits.regret import window_means

    t = np.arange(1, 1001)
    flat = np.full((2, 1000), 0.05)  # linear regret: the same per-round regret everywhere
    early, late = window_means(flat)
    np.testing.assert_allclose(late / early, 1.0)
    sqrt_regret = np.diff(np.sqrt(t), prepend=0.0)  # R_t = sqrt(t): per-round ~ t^(-1/2)
    early, late = window_means(sqrt_regret)
    assert 0.35 < late / early < 0.45  # ~ 6^(-1/2) = 0.41
    early, late = window_means(np.arange(1000.0))
    assert early == np.mean(np.arange(100, 200)) and late == np.mean(np.arange(800, 1000))


@pytest.mark.parametrize("bad", [np.ones(5), np.ones((2, 2, 20)), np.array([np.nan] * 20)])
def test_window_means_refuses_bad_curves(bad) -> None:
    from icml24.bandits.regret import window_means

    with pytest.raises(ValueError, match="per_round"):
        window_means(bad)


def test_expected_reward_is_the_oracles_value_minus_regret() -> None:
    env = NegotiationEnv(MultiIssueDomain(n_issues=2, n_values=3), types=((1.0, 0.3),))
    run = simulate(env, RandomBidder(seed=0), horizon=50, n_trials=3, seed=1)
    oracle = simulate(env, OracleBidder(), horizon=50, n_trials=3, seed=1)
    assert run.expected_reward.shape == (3, 50) and (run.expected_reward >= 0).all()
    np.testing.assert_allclose(oracle.regret, 0.0, atol=1e-12)
    # the first round of every trial is the same state for every agent: regret = oracle value - expected reward
    np.testing.assert_allclose(run.regret[:, 0], oracle.expected_reward[:, 0] - run.expected_reward[:, 0])
