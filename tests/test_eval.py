"""`moa-chat eval` without the wire: every checker, task files and their errors, the interval arithmetic
against published values, the judge's verdict parsing, the limiter and the results' sums."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from moa_chat.eval.answers import read_choice, read_number
from moa_chat.eval.checks import Choice, Contains, Expected, Number, Regex, normalise
from moa_chat.eval.judge import order_score, pairwise_verdict, rubric_score
from moa_chat.eval.limiter import ProviderLimiter
from moa_chat.eval.paired import compare, holm, paired_interval, sign_flip_p
from moa_chat.eval.results import SystemResult
from moa_chat.eval.stats import percentile, wilson
from moa_chat.eval.tasks import TaskFileError, bundled_sets, load_tasks

# ------------------------------------------------------------------ checkers


def test_expected_is_a_normalised_exact_match_of_the_reply_or_its_final_statement() -> None:
    check = Expected("Paris")
    assert check.score("paris")
    assert check.score("  **Paris.**  ")
    assert check.score("Let me think. France's capital city.\nAnswer: Paris")
    assert not check.score("Paris, or maybe Lyon")
    assert not check.score("Lyon")
    assert check.extract("The answer is Paris.") == "paris"
    assert normalise("  “Hello   World!” ") == "hello world"


def test_regex_searches_the_reply() -> None:
    check = Regex(r"\b(?i:o\(n log n\))")
    assert check.score("Merge sort runs in O(n log n) time.")
    assert not check.score("It is quadratic.")
    assert check.extract("so: O(n log n)") == "O(n log n)"


def test_contains_needs_every_value() -> None:
    check = Contains(("salt", "hash"))
    assert check.score("Use a slow HASH with a per-user Salt.")
    assert not check.score("Use a hash.")
    assert check.extract("Use a hash.") == "hash"
    assert check.extract("nothing") is None


@pytest.mark.parametrize(
    ("reply", "letter"),
    [
        ("The answer is (C).", "C"),
        ("Answer: b", "B"),
        ("I think it's **C**", "C"),
        ("Reasoning first...\n\nC", "C"),
        ("C) 7 is prime", "C"),
        ("Option B looks wrong; the correct answer is C.", "C"),
        ("It must be 7.", "C"),  # the one option the reply quotes
        ("ANSWER: C", "C"),
        ("A or B, hard to say", None),
        ("", None),
    ],
)
def test_choice_letter_is_extracted_robustly(reply: str, letter: str | None) -> None:
    assert read_choice(reply, ("4", "6", "7"), "ABC").value == letter


def test_choice_scores_the_letter_and_renders_the_options_and_the_answer_line() -> None:
    check = Choice(("4", "6", "7"), "C")
    assert check.score("The answer is C")
    assert not check.score("The answer is A")
    assert check.render("Which is prime?") == (
        "Which is prime?\n\nA) 4\nB) 6\nC) 7\n\n"
        'End your reply with a line of the form "ANSWER: X". X is the letter of the correct option: one of A, B, C.'
    )
    assert Number(4).render("2 + 2?").endswith('"ANSWER: <number>". Give the final number alone: no units, no working.')


@pytest.mark.parametrize(
    ("reply", "number"),
    [
        ("Answer: 42", 42.0),
        ("6 × 7 = 42", 42.0),
        ("The answer is $1,234.50 in total (from 3 payments).", 1234.5),
        ("That is 15%.", 15.0),
        ("Half: 3/4 of 1", None),  # two numbers and no stated answer: unreadable, not the last one
        ("Answer: 3/4", 0.75),
        ("It drops to -5 degrees", -5.0),
        ("no number here", None),
    ],
)
def test_numbers_are_read_as_models_write_them(reply: str, number: float | None) -> None:
    read = read_number(reply).value
    assert (float(read) if read is not None else None) == number


def test_number_uses_its_tolerance() -> None:
    check = Number(266.6667, tolerance=0.01)
    assert check.score("about 266.67 metres per minute. Answer: 266.67")
    assert not check.score("Answer: 266.5")
    assert Number(4).score("2 + 2 = 4")
    assert not Number(4).score("2 + 2 = 5")
    assert Number(4).extract("Answer: 4.0") == "4"


# ------------------------------------------------------------------ task files


def test_jsonl_and_yaml_task_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("the notes", encoding="utf-8")
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text(
        '{"id": "n", "prompt": "2+2?", "number": 4}\n\n'
        '{"prompt": "pick", "choices": ["x", "y"], "answer": "y", "attachments": ["notes.txt"]}\n'
        '{"prompt": "open", "tools": true, "rubric": "be brief"}\n',
        encoding="utf-8",
    )
    tasks = load_tasks(str(jsonl)).tasks
    assert [t.id for t in tasks] == ["n", "2", "3"]
    assert isinstance(tasks[1].check, Choice) and tasks[1].check.answer == "B"
    assert tasks[1].attachments == (str(tmp_path / "notes.txt"),)
    assert tasks[2].judged and tasks[2].tools and tasks[2].rubric == "be brief"
    yaml_file = tmp_path / "t.yaml"
    yaml_file.write_text("tasks:\n  - prompt: hi\n    regex: 'h.'\n  - prompt: bye\n    expected: ciao\n")
    assert [type(t.check).__name__ for t in load_tasks(str(yaml_file)).tasks] == ["Regex", "Expected"]


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("- prompt: a\n  number: 4\n- prompt: b\n  nmber: 5\n", 4, "nmber: unknown key (did you mean 'number'?)"),
        ("- prompt: a\n- number: 5\n", 2, "prompt: every task needs a prompt"),
        ("- prompt: a\n  number: 4\n  regex: x\n", 3, "regex: a task takes one check"),
        ("- prompt: a\n  choices: [x, y]\n  answer: Q\n", 3, "answer: `choices` needs an `answer`"),
        ("- prompt: a\n  regex: '('\n", 2, "regex: invalid regular expression"),
        ("- prompt: a\n  number: four\n", 2, "number: expected a number"),
        ("- prompt: a\n  number: 4\n  tolerance: -1\n", 3, "tolerance: expected a number"),
        ("- prompt: a\n  answer: B\n", 2, "answer: `answer` goes with `choices`"),
        ("- id: x\n  prompt: a\n- id: x\n  prompt: b\n", 3, "id: 'x' is used twice (also on line 1)"),
        ("- prompt: a\n  bad: [\n", 3, "invalid YAML"),
    ],
)
def test_task_file_errors_name_file_line_and_key(tmp_path: Path, text: str, line: int, words: str) -> None:
    path = tmp_path / "tasks.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TaskFileError) as caught:
        load_tasks(str(path))
    assert str(caught.value).startswith(f"{path}:{line}: ")
    assert words in str(caught.value)


def test_jsonl_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"prompt": "a", "number": 1}\n{"prompt": "b", \n', encoding="utf-8")
    with pytest.raises(TaskFileError, match=rf"^{path}:2: invalid JSON"):
        load_tasks(str(path))


def test_bundled_sets_load_by_name_and_each_holds_a_few_dozen() -> None:
    assert set(bundled_sets()) >= {"arithmetic", "multiple_choice", "open_ended"}
    arithmetic = load_tasks("arithmetic").tasks
    assert len(arithmetic) >= 24 and all(isinstance(t.check, Number) for t in arithmetic)
    choices = load_tasks("multiple_choice").tasks
    assert len(choices) >= 24 and all(isinstance(t.check, Choice) for t in choices)
    open_ended = load_tasks("open_ended").tasks
    assert len(open_ended) >= 20 and all(t.judged and t.rubric for t in open_ended)
    with pytest.raises(TaskFileError, match="did you mean 'arithmetic'"):
        load_tasks("arithmetc")


# ------------------------------------------------------------------ statistics (published values)


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    # Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table I, method 3.
    [(81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718)],
)
def test_wilson_interval_matches_published_values(k: int, n: int, low: float, high: float) -> None:
    interval = wilson(k, n)
    assert (round(interval.low, 4), round(interval.high, 4)) == (low, high)


@pytest.mark.parametrize(
    ("table", "low", "high"),
    # Newcombe (1998), "Improved confidence intervals for the difference between binomial proportions based on
    # paired data", method 10, as Fagerland, Lydersen and Laake's contingencytables reproduces it: (both right,
    # first only, second only, neither).
    [((59, 6, 16, 80), -0.1186, -0.0046)],
)
def test_paired_interval_matches_published_values(table: tuple[int, int, int, int], low: float, high: float) -> None:
    both, first, second, neither = table
    a = [1.0] * (both + first) + [0.0] * (second + neither)
    b = [1.0] * both + [0.0] * first + [1.0] * second + [0.0] * neither
    interval = paired_interval(a, b)
    assert (round(interval.low, 4), round(interval.high, 4)) == (low, high)


def test_the_sign_flip_test_is_mcnemars_exact_test_on_right_and_wrong() -> None:
    import math

    # 6 tasks only the first got right, 16 only the second: a two-sided binomial test on the 22 that differ.
    differences = [1.0] * 6 + [-1.0] * 16 + [0.0] * 139
    binomial = 2 * sum(math.comb(22, k) for k in range(7)) / 2**22
    assert sign_flip_p(differences) == pytest.approx(binomial)
    assert sign_flip_p([0.0, 0.0]) == 1.0
    # Fractional differences (a mean over three repeats) are counted exactly: 2 of the 2⁴ patterns reach 7/3.
    assert sign_flip_p([1.0, 2 / 3, 1 / 3, 1 / 3]) == pytest.approx(2 / 16)


def test_holm_adjusts_step_down() -> None:
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([]) == []


def test_wilson_by_hand_and_with_a_half_for_ties() -> None:
    # 7 of 10: p = .7, z² = 3.8415; centre = (.7 + .19207)/1.38415 = .64457; half = 1.95996·√(.021 + .0096)/1.38415
    interval = wilson(7, 10)
    assert interval.low == pytest.approx(0.64457 - 0.24770, abs=1e-4)
    assert interval.high == pytest.approx(0.64457 + 0.24770, abs=1e-4)
    # A win, a tie and a loss: a win rate of 1.5/3 = .5, symmetric about .5.
    ties = wilson(1.5, 3)
    assert ties.low + ties.high == pytest.approx(1.0)
    assert wilson(0, 0).low == 0.0 and wilson(0, 0).high == 1.0


def test_a_difference_is_called_only_when_the_paired_test_says_so() -> None:
    clear = compare("A", [1.0] * 9 + [0.0], "B", [1.0] * 3 + [0.0] * 7)
    assert clear.delta == pytest.approx(0.6) and clear.holds and clear.verdict() == "A beats B"
    close = compare("A", [1.0] * 6 + [0.0] * 4, "B", [1.0] * 5 + [0.0] * 5)
    assert not close.holds and close.verdict() == "A vs B: no clear difference"
    reverse = compare("A", [1.0] * 3 + [0.0] * 7, "B", [1.0] * 9 + [0.0])
    assert reverse.verdict() == "B beats A"


def test_percentiles() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([float(n) for n in range(1, 11)], 90) == pytest.approx(9.1)


def test_accuracy_of_a_system_is_its_mean_score() -> None:
    result = SystemResult("x", "preset", runs={1: {"a": 1.0, "b": 0.0, "c": 1.0, "d": 1.0}})
    assert result.quality == 0.75
    assert result.interval == wilson(3, 4)
    repeated = SystemResult("x", "preset", runs={1: {"a": 1.0, "b": 0.0}, 2: {"a": 0.0, "b": 0.0}, 3: {"a": 1.0}})
    assert repeated.scores == {"a": pytest.approx(2 / 3), "b": 0.0}  # each task's mean over its repeats
    assert repeated.repeat_qualities == [0.5, 0.0, 1.0]


# ------------------------------------------------------------------ the judge's verdicts


def test_pairwise_verdicts_and_what_each_order_gives() -> None:
    assert pairwise_verdict("A is better.\n[[A]]") == "A"
    assert pairwise_verdict("first [[A]] then on reflection [[B]]") == "B"
    assert pairwise_verdict("equal [[C]]") == "tie"
    assert pairwise_verdict("no verdict") is None
    assert order_score("A", candidate="A") == 1.0
    assert order_score("A", candidate="B") == 0.0
    assert order_score("tie", candidate="B") == 0.5
    assert rubric_score("good\n[[7]]") == 0.7
    assert rubric_score("[[11]]") is None


# ------------------------------------------------------------------ the limiter


def test_limiter_caps_a_provider_and_a_429_halves_it() -> None:
    now = [0.0]
    limiter = ProviderLimiter(4, clock=lambda: now[0])
    stop = threading.Event()
    assert all(limiter.acquire({"p"}, stop) for _ in range(4))
    assert limiter.peak["p"] == 4
    limiter.slow("p", 0.0)
    assert limiter.cap("p") == 2 and limiter.rate_limits == {"p": 1}
    for _ in range(4):
        limiter.release({"p"}, rate_limited=True)
    limiter.slow("p", None)
    assert limiter.cap("p") == 1
    limiter.slow("p", None)
    assert limiter.cap("p") == 1  # never below one
    now[0] = 10.0  # past the pause
    assert limiter.acquire({"p"}, stop)
    for _ in range(10):
        limiter.release({"p"}, rate_limited=False)
    assert limiter.cap("p") == 2  # calm again: it grows back by one


def test_limiter_acquire_gives_up_when_stopped() -> None:
    limiter = ProviderLimiter(1)
    stop = threading.Event()
    assert limiter.acquire({"p", "q"}, stop)
    stop.set()
    assert not limiter.acquire({"q"}, stop)


# ------------------------------------------------------------------ the progress bar


def test_progress_bar_line_and_quiet_off_a_terminal() -> None:
    import io

    from moa_chat.eval.progress import ProgressBar, bar_line
    from moa_chat.eval.runner import Snapshot

    snapshot = Snapshot(total=40, done=10, failed=1, rate_limited=2, cost=0.0123, started=100.0)
    line = bar_line(snapshot, now=110.0)
    assert line == "answers [######------------------] 10/40 · 1 failed · 2 × 429 · 1.0/s · ETA 30s · $0.012"
    err = io.StringIO()
    ProgressBar(err, enabled=False)(snapshot)
    assert err.getvalue() == ""
    bar = ProgressBar(err, enabled=True)
    bar(snapshot)
    bar.end()
    assert err.getvalue().startswith("\ranswers [") and err.getvalue().endswith("\n")


def test_a_task_supplies_its_answer_extractor() -> None:
    tasks = load_tasks("arithmetic").tasks
    extract = tasks[0].extractor
    assert extract is not None and extract("so it is 66.\nAnswer: 66") == "66"
    assert load_tasks("open_ended").tasks[0].extractor is None


def test_a_provider_that_serves_one_request_at_a_time_gets_one_turn_at_a_time() -> None:
    from moa_chat.config import load_config
    from moa_chat.eval.runner import one_at_a_time, systems_for

    config = load_config()
    systems = systems_for(config, [config.preset("local"), config.preset("demo")], solo=False, baselines=[])
    assert one_at_a_time(systems) == {"local": 1}  # the local preset's max_workers: 1
    limiter = ProviderLimiter(16, ceilings=one_at_a_time(systems))
    stop = threading.Event()
    assert limiter.cap("local") == 1 and limiter.cap("demo") == 16
    assert limiter.acquire({"local"}, stop)
    stop.set()
    assert not limiter.acquire({"local"}, stop)  # the one slot is taken


def test_the_docs_show_the_judge_prompts_as_they_are() -> None:
    from moa_chat.prompts import JUDGE_PAIRWISE_PROMPT, JUDGE_RUBRIC_PROMPT

    text = (Path(__file__).parent.parent / "docs" / "eval.md").read_text(encoding="utf-8")
    assert JUDGE_PAIRWISE_PROMPT in text
    assert JUDGE_RUBRIC_PROMPT in text
