"""Built-in heuristic scorers, including the ADR's exact-match, placeholder and field checks."""

from __future__ import annotations

import json

from evalloop.scoring import heuristic as h


def test_exact_match_noop_follows_the_adr():
    ok = h.exact_match_noop(None, json.dumps({"action": "NOOP", "reason": "Identical content"}), None)
    assert ok.value == 1.0
    assert h.exact_match_noop(None, {"action": "NOOP", "reason": "same"}, None).value == 0.0
    assert h.exact_match_noop(None, {"action": "UPDATE", "reason": "identical"}, None).value == 0.0
    unparseable = h.exact_match_noop(None, "not json", None)
    assert unparseable.message == "output is not valid JSON: Expecting value: line 1 column 1 (char 0)"


def test_every_json_scorer_fails_unparseable_output_as_the_targets_failure():
    """An output a scorer cannot parse is a real 0 counted against the target, never errored."""
    from evalloop.scoring import llm

    graders = {
        "exact-match-noop": lambda out: h.exact_match_noop(None, out, None),
        "required-fields": lambda out: h.required_fields(None, out, None),
        "equals (field)": lambda out: h.equals(None, out, {"action": "NOOP"}, field="action"),
        "json-valid": lambda out: h.json_valid(None, out, None, required=["a"]),
        "similarity-detection": lambda out: llm.similarity_detection(None, out, {"action": "NOOP"}),
        "quality-label": lambda out: llm.quality_label(None, out, {"quality": "high"}),
    }
    for name, grade in graders.items():
        for output, message in (("<html>502</html>", "output is not valid JSON: "),
                                ('{"action": "NO', "output is not valid JSON: ")):
            score = grade(output)
            assert (score.value, score.errored, score.failure) == (0.0, False, "target"), name
            assert score.message.startswith(message), (name, score.message)
    for name in ("exact-match-noop", "required-fields", "similarity-detection"):
        score = graders[name]("[1, 2]")
        assert (score.value, score.errored, score.failure) == (0.0, False, "target"), name
        assert score.message == "output is not a JSON object (got list)"
    wrong = llm.similarity_detection(None, {"action": "CREATE"}, {"action": "NOOP"})
    assert wrong.value == 0.0 and wrong.failure is None   # a wrong answer is not a parse failure


def test_placeholder_detection():
    assert h.no_placeholder(None, "Updated memory <memory-id> with x", None).value == 0.0
    assert h.no_placeholder(None, {"id": "{{id}}"}, None).value == 0.0
    assert h.no_placeholder(None, "Updated memory mem_42 with x; 3 < 4 > 2", None).value == 1.0


def test_required_fields():
    assert h.required_fields(None, {"id": "1", "content": "c", "tags": ["t"]}, None).value == 1.0
    score = h.required_fields(None, {"id": "1", "content": "", "tags": []}, None)
    assert score.value == 0.0 and "content, tags" in score.message
    assert h.required_fields(None, {"a": {"b": 1}}, None, fields=["a.b"]).value == 1.0


def test_equals_contains_regex_json():
    assert h.equals(None, " Hello  World", "hello world").value == 1.0
    assert h.equals(None, "a", "b").value == 0.0
    assert h.equals(None, '{"action": "UPDATE"}', {"action": "UPDATE"}, field="action").value == 1.0
    assert h.contains(None, "The Answer is 42", "answer").value == 1.0
    assert h.contains(None, "abc", None, text=["a", "z"]).value == 0.0
    assert h.regex(None, "ID-123", None, pattern=r"id-\d+").value == 1.0
    assert h.regex(None, "ID-123", None, pattern=r"id-\d+", ignore_case=False).value == 0.0
    assert h.regex(None, "x", None, pattern="(").errored
    assert h.json_valid(None, '{"a": 1}', None, required=["a"]).value == 1.0
    assert h.json_valid(None, "{a: 1}", None).value == 0.0


def test_keywords_seed_003_grading():
    expected = {"keywords": ["darrin", "phoenix"], "max_words": 6}
    assert h.keywords(None, "Darrin Phoenix", expected).value == 1.0
    wordy = "Your name is Darrin Smith and you live in Phoenix, Arizona."
    assert h.keywords(None, wordy, expected).value == 0.5
    assert h.keywords(None, "I don't have that information.", expected).value == 0.0
    assert h.keywords(None, "Marriott", expected).value == 0.0
    assert h.keywords(None, "only phoenix", None, keywords=["darrin", "phoenix"], mode="any").value == 1.0
    assert h.keywords(None, "x", None).errored
