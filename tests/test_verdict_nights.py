"""Verdicts over many nights (issue #36): the floor kept at night, a sharp break red at once,
floors judged with the noise, no red streak from a lucky first run, and a chart whose design
comes from the scorer's threshold. Every run here is a real ``run_suite`` on a real SQLite
history; the target answers the scores each test draws (seeded)."""

from __future__ import annotations

import numpy as np
import pytest

from evalloop import RunOptions, load_settings, run_suite
from evalloop.verdicts import sequential
from evalloop.verdicts.verdict import VerdictStatus
from support.project import TARGET, make_project, write_answers

SCORERS = '''
from evalloop import Score, scorer

@scorer("pass-fail", kind="heuristic")
def pass_fail(input, output, expected):
    """1 or 0 as the target answers; the heuristic defaults (threshold 10 %, floor 95 %)."""
    return Score(value=float(output))

@scorer("judge", kind="llm_judge")
def judge(input, output, expected):
    """A judge's grade as the target answers; the judge defaults (threshold 20 %, floor 70 %)."""
    return Score(value=float(output))
'''


def lab(tmp_path, scorer: str, n: int, **scorer_settings):
    spec = {"name": "nights", "target": "sut:controlled",
            "scorers": [{"name": scorer, **scorer_settings}],
            "cases": [{"id": f"c{i:03d}", "input": {"id": f"c{i:03d}"}} for i in range(n)]}
    root = make_project(tmp_path, {"nights": spec}, target=TARGET, scorers=SCORERS)
    (root / "evalloop.toml").write_text("run_log = false\nlearn = false\n")
    return root


def night(root, answers, values, *, nightly: bool = True):
    write_answers(answers, {f"c{i:03d}": float(v) for i, v in enumerate(values)})
    return run_suite("nights", RunOptions(engine="local", nightly=nightly), settings=load_settings(root)).comparison


def judged(rng, q, drop=0.0, shift=0.0):
    """One night of judge grades: each case's quality, lowered by ``drop``, plus the judge's noise."""
    return np.clip(q * (1 - drop) + shift + rng.normal(0, 0.2, q.size), 0, 1)


def longest_red_streak(statuses) -> int:
    """The most failing verdicts in a row."""
    streak = longest = 0
    for s in statuses:
        streak = streak + 1 if s.fails else 0
        longest = max(longest, streak)
    return longest


def test_nightly_mode_keeps_the_floor(tmp_path, answers):
    """Finding 1: 10 of 20 pass/fail cases broken under the default 95 % floor fail the first
    broken night in nightly mode too, as a one-off run does."""
    root = lab(tmp_path, "pass-fail", 20)
    for _ in range(5):
        night(root, answers, [1.0] * 20)
    broken = night(root, answers, [1.0] * 10 + [0.0] * 10)
    s = broken.scorers[0]
    assert broken.fails, s.reason
    assert s.status in (VerdictStatus.REGRESSED, VerdictStatus.BELOW_FLOOR)
    assert "floor" in s.reason


def test_a_sharp_break_is_red_the_first_night(tmp_path, answers):
    """Finding 2: with the floor off, 6 of 20 pass/fail cases failing (−30 %) is red that night."""
    root = lab(tmp_path, "pass-fail", 20, min_score=0)
    for _ in range(5):
        night(root, answers, [1.0] * 20)
    s = night(root, answers, [1.0] * 14 + [0.0] * 6).scorers[0]
    assert s.status is VerdictStatus.REGRESSED, s.reason
    assert "bad night" in s.reason


def test_a_drop_of_a_suite_without_noise_is_red_the_first_night(tmp_path, answers):
    """Grades that never vary (0.8 on every run) have a run-to-run noise of 1e-17, not 0: the
    chart was designed for a threshold of 10^15 standard errors and a 62 % drop stayed a watch
    (the scheduler's webhook never heard of it). The design is capped where z is."""
    root = lab(tmp_path, "judge", 6, min_score=0)
    for _ in range(3):
        night(root, answers, [0.8] * 6, nightly=False)
    s = night(root, answers, [0.3] * 6).scorers[0]
    assert s.status is VerdictStatus.REGRESSED, s.reason


def test_a_noisy_mean_just_under_its_floor_is_a_watch_not_a_failure(tmp_path, answers):
    """Finding 3: the floor allows for noise. A 50-case judge suite that sits at its floor is
    under it on about half its runs; a mean under the floor by less than the noise is a watch
    ("near its floor"), one far under it fails — in a one-off run and at night alike."""
    rng = np.random.default_rng(7)
    q = rng.beta(6, 2, 50)
    root = lab(tmp_path, "judge", 50)
    for _ in range(5):
        night(root, answers, judged(rng, q), nightly=False)
    for nightly in (False, True):
        near = judged(rng, q)
        near += 0.69 - near.mean()  # just under the 0.70 floor
        s = night(root, answers, near, nightly=nightly).scorers[0]
        assert s.status is VerdictStatus.WATCH, (nightly, s.reason)
        assert "near its floor" in s.reason
    far = judged(rng, q)
    far += 0.55 - far.mean()
    s = night(root, answers, far, nightly=False).scorers[0]
    assert s.status is VerdictStatus.BELOW_FLOOR, s.reason


def test_ten_points_under_the_floor_is_red_within_two_nights(tmp_path, answers):
    rng = np.random.default_rng(11)
    q = rng.beta(6, 2, 50)
    root = lab(tmp_path, "judge", 50)
    for _ in range(5):
        night(root, answers, judged(rng, q))
    statuses = []
    for _ in range(2):
        values = judged(rng, q)
        values += 0.60 - values.mean()
        statuses.append(night(root, answers, values).scorers[0].status)
    assert VerdictStatus.BELOW_FLOOR in statuses or VerdictStatus.REGRESSED in statuses, statuses


def test_a_lucky_first_run_starts_no_red_streak(tmp_path, answers):
    """Finding 4: a first run that scored high by chance (+0.16 on every case; its mean 0.12 high)
    must not freeze the baseline: the ordinary nights after it enter the baseline, no red streak
    is longer than three nights, and the suite is green again (4e61118: red from night 3 on)."""
    rng = np.random.default_rng(3)
    q = rng.beta(6, 2, 50)
    root = lab(tmp_path, "judge", 50, min_score=0)
    night(root, answers, judged(rng, q, shift=0.16))
    statuses = [night(root, answers, judged(rng, q)).scorers[0].status for _ in range(12)]
    assert longest_red_streak(statuses) <= 3, statuses
    assert not any(s.fails for s in statuses[-6:]), statuses


def test_a_lucky_start_with_a_second_high_run_starts_no_red_streak(tmp_path, answers):
    """Finding 4, the month ``bench/alarms.py`` (judge-50-lucky, seed 3000, trial 8) found red on
    nine nights in a row on main 29a4c0c: a lucky first run (+0.10) and a second run 0.07 high by
    chance. The drop's soundness was judged against each case's median over the recent runs, and
    a bounded judge's grades pile up at 1.0, so that median sits above the mean the nights are
    compared with: every ordinary night "held" as a drop, was kept out, and the window froze on
    the two high runs. Against the runs' median level (the run-level median of the recent runs'
    means) the ordinary nights hold no drop, enter the baseline, and the alarm ends."""
    rng = np.random.default_rng(3000)
    for _ in range(8):  # the bench's earlier trials of this seed: the same draws as its trial 8
        rng.beta(6, 2, 50)
        for _ in range(35):
            rng.normal(0, 0.2, 50)
    q = rng.beta(6, 2, 50)
    root = lab(tmp_path, "judge", 50, min_score=0)
    night(root, answers, judged(rng, q, shift=0.10))
    statuses = [night(root, answers, judged(rng, q)).scorers[0].status for _ in range(16)]
    assert longest_red_streak(statuses) <= 3, statuses


def test_the_sound_centre_of_a_bounded_judge_has_no_bias_and_outvotes_a_lucky_run():
    """The sound baseline of an unchanged suite whose grades are clipped at 1 shows no drop on
    average (a per-case median showed about +0.8 standard errors), and a run 0.10 high as a whole
    among five moves it by less than a tenth of that."""
    from evalloop.verdicts.drop import standardized_drop
    from evalloop.verdicts.soundness import sound_centre
    from evalloop.verdicts.verdict import noise_var

    rng = np.random.default_rng(7)
    fair, median, lucky = [], [], []
    for _ in range(200):
        q = rng.beta(6, 2, 50)
        w = np.stack([judged(rng, q) for _ in range(11)], axis=1)
        x = judged(rng, q)
        fair.append(standardized_drop(x - sound_centre(w), noise_var(x, w), 11.0))
        median.append(standardized_drop(x - np.median(w, axis=1), noise_var(x, w), 11.0))
        five = w[:, :5].copy()
        shifted = five.copy()
        shifted[:, 0] = np.clip(shifted[:, 0] + 0.10, 0, 1)
        lucky.append(float(np.mean(sound_centre(shifted) - sound_centre(five))))
    assert abs(np.mean(fair)) < 0.15, np.mean(fair)
    assert np.mean(median) > 0.5  # the centre it replaces
    assert np.mean(lucky) < 0.01, np.mean(lucky)


def test_the_chart_is_designed_for_the_scorers_threshold():
    """Finding 6: the chart's reference value grows with the threshold in standard errors, so a
    drop far under the threshold is not what a suite with many cases is designed to catch; a
    suite with few cases keeps the sensitive chart."""
    small_k, _ = sequential.design(0.20, 0.75, 0.75 * 0.20 / 5.0, 0.05, 1)  # 50 judged cases: 5 se
    large_k, _ = sequential.design(0.20, 0.75, 0.75 * 0.20 / 10.8, 0.05, 1)  # 200 judged cases: 10.8 se
    assert small_k <= 1.5
    assert large_k >= 0.65 * 10.8  # a drop of half the threshold (5.4 se) drifts down


def test_a_red_chart_stays_red_while_the_drop_lasts():
    """A night of a lasting drop that happens to show less than ``k`` keeps the chart red;
    a night without a drop ends it."""
    k, h = sequential.design(0.20, 0.75, 0.75 * 0.20 / 4.65, 0.05, 1)
    chart = None
    for z in (3.5, 3.5):
        chart = sequential.step(chart, z, k, h)
    assert chart.red
    dip = sequential.step(chart, 0.9 * k, k, h)
    assert dip.red
    assert not sequential.step(dip, 0.0, k, h).red


@pytest.mark.parametrize("n", [200])
def test_a_drop_far_under_the_threshold_stays_green_on_a_large_suite(tmp_path, answers, n):
    """Finding 6 through real runs: a lasting 7 % drop on 200 judged cases (threshold 20 %)."""
    rng = np.random.default_rng(5)
    q = rng.beta(6, 2, n)
    root = lab(tmp_path, "judge", n, min_score=0)
    for _ in range(5):
        night(root, answers, judged(rng, q))
    statuses = [night(root, answers, judged(rng, q, drop=0.07)).scorers[0].status for _ in range(6)]
    assert VerdictStatus.REGRESSED not in statuses, statuses
