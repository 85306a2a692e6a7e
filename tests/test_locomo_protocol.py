"""The `locomo` protocol's scoring equals LoCoMo's own `task_eval/evaluation.py` on tricky answers.

Every expected value below was worked out by hand from the official rules (not by running this
code): normalise = delete commas, lower-case, delete ASCII punctuation, drop a/an/the/and, join
white space; stem each word with NLTK's Porter stemmer; token F1 over the stems with 0 whenever
nothing overlaps; category 1 splits both sides at commas (mean over gold parts of the best
prediction part); category 3 keeps the gold before its first ';'; categories 2-4 compare whole
answers; category 5 is 1 only when the answer contains "no information available" or "not
mentioned". The comment on each row names the rule it checks. The triples are in locomo10.json's
shape (answers as the file holds them: strings, and an int year).
"""

from __future__ import annotations

import pytest

from evalloop.retrieval import locomo_eval
from evalloop.retrieval.answer_scorers import abstention, bleu_1, evalloop_f1, locomo_adversarial, locomo_f1
from evalloop.retrieval.answers import abstains

# (prediction, gold, category, LoCoMo's score, evalloop's corrected F1 where it differs or None)
TRIPLES = [
    ("2022", "2,022", 2, 1.0, 0.0),                       # commas are deleted, not turned into spaces
    ("August 2023", "August,2023", 2, 0.0, 1.0),           # ... so "August,2023" is one word, "august2023"
    ("7 May, 2023", "7 May 2023", 2, 1.0, None),           # a comma in the answer is deleted too
    ("2022", 2022, 2, 1.0, None),                          # a gold the file holds as an int is str()-ed
    ("The", "a", 4, 0.0, 1.0),                             # both normalise to nothing: no overlap, 0
    ("", "Paris", 4, 0.0, None),                           # an empty answer scores 0
    ("the cat and the dog", "cat dog", 4, 1.0, None),      # a/an/the/and are dropped
    ("Guitar!", "guitar.", 4, 1.0, None),                  # punctuation deleted, lower case
    ("guitar lessons", "guitar", 4, 2 / 3, None),          # token F1: precision 1/2, recall 1
    ("dying", "die", 4, 1.0, 0.0),                         # NLTK's Porter ("dying" -> "die"); SQLite's gives "dy"
    ("skies", "sky", 4, 1.0, 0.0),                         # NLTK's Porter ("skies" -> "sky"); SQLite's "ski"
    ("Pepper, coffee", "coffee, Pepper", 1, 1.0, None),    # multi-hop: each gold part takes its best part
    ("Pepper", "Pepper, coffee", 1, 0.5, None),            # multi-hop: mean over gold parts (1 + 0) / 2
    ("hiking, swimming", "hiking, swimming,", 1, 2 / 3, 1.0),  # multi-hop: an empty gold part counts as 0
    ("hiking and swimming", "hiking, swimming", 1, 2 / 3, None),  # multi-hop: one answer part vs two gold parts
    ("Kiel", "Kiel; near the Baltic", 3, 1.0, None),       # category 3: the gold before its first ';'
    ("near the Baltic", "Kiel; near the Baltic", 3, 0.0, None),  # ... and nothing after it
    ("Not mentioned in the conversation", "on the sofa", 5, 1.0, None),  # category 5: "not mentioned"
    ("No information available.", "on the sofa", 5, 1.0, None),  # category 5: "no information available"
    ("NOT MENTIONED", "on the sofa", 5, 1.0, None),        # category 5: any case
    ("Unknown", "on the sofa", 5, 0.0, None),              # category 5: evalloop's reading credits it, LoCoMo's not
    ("I don't know.", "on the sofa", 5, 0.0, None),        # category 5: idem
    ("The conversation does not mention it", "x", 5, 0.0, None),  # category 5: "not mention" is not "not mentioned"
    ("on the sofa", "on the sofa", 5, 0.0, None),          # category 5: the trap answer scores 0
]


@pytest.mark.parametrize(("prediction", "gold", "category", "official", "ours"), TRIPLES)
def test_locomo_scoring_equals_the_official_rules(prediction, gold, category, official, ours):
    assert locomo_eval.score(prediction, gold, category) == pytest.approx(official, abs=1e-12)
    if category == 5:
        scored = locomo_adversarial({}, {"answer": prediction}, {"answer": gold, "category": 5, "adversarial": True})
    else:
        scored = locomo_f1({}, {"answer": prediction}, {"answer": gold, "category": category})
    assert scored.value == pytest.approx(official, abs=1e-12)  # the scorer is the same function
    if ours is not None and category != 5:  # evalloop's corrected F1 stays, under its own name
        mine = evalloop_f1({}, {"answer": prediction}, {"answer": gold, "category": category})
        assert mine.value == pytest.approx(ours, abs=1e-12)


def test_category_5_is_asked_as_a_two_way_choice_and_a_letter_reply_is_read_as_its_option():
    asked, choice = locomo_eval.question_text("Where does Bob's dog sleep?", 5, trap="on the sofa", key="conv-1:q4")
    assert choice is not None and {choice.a, choice.b} == {"on the sofa", locomo_eval.NOT_MENTIONED}
    assert asked.startswith("Where does Bob's dog sleep? ") and f"(a) {choice.a} (b) {choice.b}" in asked
    abstain = "a" if choice.a == locomo_eval.NOT_MENTIONED else "b"
    assert locomo_eval.score(locomo_eval.read_choice(abstain.upper(), choice), "", 5) == 1.0  # one letter
    assert locomo_eval.score(locomo_eval.read_choice(f"({abstain})", choice), "", 5) == 1.0  # "(a)"
    other = "b" if abstain == "a" else "a"
    assert locomo_eval.read_choice(f"({other})", choice) == "on the sofa"
    assert locomo_eval.read_choice(f"{abstain})", choice) == f"{abstain})"  # two characters: taken as said
    # the order is drawn per question, fixed across runs, and both orders occur
    orders = {locomo_eval.two_way_choice("q", "t", f"conv-1:q{i}").a for i in range(40)}
    assert orders == {"t", locomo_eval.NOT_MENTIONED}
    assert locomo_eval.two_way_choice("q", "t", "k").a == locomo_eval.two_way_choice("q", "t", "k").a


def test_temporal_questions_carry_the_date_hint_and_the_others_are_asked_as_they_are():
    assert locomo_eval.question_text("When did Alice adopt the cat?", 2)[0].endswith(locomo_eval.DATE_HINT)
    assert locomo_eval.question_text("What is the cat called?", 4) == ("What is the cat called?", None)


def test_a_question_with_no_locomo_category_is_scored_as_a_whole_answer():
    # LongMemEval's question types are not LoCoMo categories: whole-answer F1, as categories 2-4
    scored = locomo_f1({}, {"answer": "Bergen, Norway"}, {"answer": "Bergen", "category": "multi-session"})
    assert scored.value == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="no QA category"):
        locomo_eval.score("x", "x", 7)


def test_bleu_1_is_nltk_sentence_bleu_on_unigrams():
    # brevity penalty exp(1 - 3/2) times unigram precision 2/2
    value = bleu_1({}, {"answer": "guitar lessons"}, {"answer": "Guitar lessons weekly"}).value
    assert value == pytest.approx(0.6065306597126334)
    assert bleu_1({}, {"answer": "a"}, {"answer": "guitar"}).value == 0.0  # no unigram in common
    assert bleu_1({}, {"answer": ""}, {"answer": "guitar"}).value == 0.0  # empty: 0, as mem0's
    assert bleu_1({}, {"answer": "x"}, {"answer": "y", "adversarial": True}).skipped


@pytest.mark.parametrize("answer", ["You didn't mention a cat.", "You never mentioned owning a bike.",
                                    "The information provided is not enough to answer that.",
                                    "You haven\u2019t shared where you moved first."])
def test_abstention_reads_longmemeval_phrasings_as_declining(answer):
    assert abstains(answer)
    graded = abstention({}, {"answer": answer}, {"answer": "Bergen", "adversarial": True})
    assert graded.value == 1.0
    assert not abstains("You moved to Bergen first.")
