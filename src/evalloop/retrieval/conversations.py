"""Synthetic multi-session conversations in LoCoMo's published JSON format, made here.

Two friends talk over several dated sessions. Most turns are chit-chat; some state a fact (a
new hobby, a pet, a move, a job), and the friend's reply echoes the fact's topic words without
its answer, as real conversations do, so text search meets distractors. Each fact gets a
single-hop question (category 4), a temporal one (2, answered by the session date), pairs of
facts a multi-hop one (1), and some facts an adversarial question about the other speaker (5).
The file goes through ``evalloop bench import locomo`` like the real one; evalloop calibrates
its store's fusion on it (``bench/fusion_weights.py``), never on a public benchmark.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

NAMES = ["Alice", "Bruno", "Chiara", "Dev", "Elif", "Farid", "Greta", "Hiro", "Ines", "Jonas",
         "Kemi", "Luca", "Mei", "Nadia", "Omar", "Priya"]

# (fact said by the speaker, the friend's echo, question, slot, slot values, question's verb phrase)
EVENTS: list[tuple[str, str, str, str, list[str], str]] = [
    ("Guess what, I finally signed up for {X} classes at the community centre!",
     "Classes at the community centre sound like fun, you always wanted something like that.",
     "What classes did {S} sign up for?", "X",
     ["pottery", "salsa", "woodworking", "watercolour", "improv", "ceramics"], "sign up for classes"),
    ("We adopted a little {X} from the shelter, she's called {Y}.",
     "Aww, a pet from the shelter! Send me pictures of her soon.",
     "What is the name of the pet {S} adopted?", "Y",
     ["Biscuit", "Miso", "Pepper", "Luna", "Noodle", "Juniper"], "adopt a pet"),
    ("My sister just moved to {X} for her new job at the hospital.",
     "Moving for a job is a big step, your sister must be excited and nervous.",
     "Which city did {S}'s sister move to?", "X",
     ["Lisbon", "Montreal", "Osaka", "Tallinn", "Cape Town", "Valencia"], "sister move"),
    ("I've been reading {X} every night before bed, I can't put it down.",
     "I love a book you can't put down. Reading before bed is the best habit.",
     "What book has {S} been reading at night?", "X",
     ["Piranesi", "The Overstory", "Station Eleven", "Klara and the Sun", "Circe", "Middlemarch"],
     "read a book"),
    ("I got the offer! I'm starting as a {X} at a small studio next month.",
     "Congratulations on the offer, a new job at a studio is so exciting!",
     "What job did {S} get an offer for?", "X",
     ["sound engineer", "graphic designer", "project manager", "data analyst", "animator"],
     "get a job offer"),
    ("For my birthday we went hiking in {X}, the views were unreal.",
     "A birthday hike with views like that sounds perfect, I'm jealous.",
     "Where did {S} go hiking for the birthday?", "X",
     ["the Dolomites", "Snowdonia", "Patagonia", "the Tatras", "Madeira", "the Rockies"],
     "go hiking"),
    ("I finally bought a {X}, it arrived yesterday and I love it.",
     "Nothing beats buying something you wanted for ages and loving it.",
     "What did {S} finally buy?", "X",
     ["cargo bike", "record player", "sewing machine", "telescope", "kayak", "espresso machine"],
     "buy something"),
    ("I'm learning {X} with an app, twenty minutes a day.",
     "Twenty minutes a day adds up fast, learning with an app is clever.",
     "Which language is {S} learning?", "X",
     ["Portuguese", "Korean", "Greek", "Swahili", "Dutch", "Turkish"], "learn a language"),
]
CHAT = ["Hey {O}! It's been a while, how have you been?", "Haha, that's so true.",
        "I know what you mean, the week has been a blur.", "How is everything with you, {O}?",
        "Same here, work has been busy but good.", "That sounds lovely, I'm happy for you.",
        "Oh wow, tell me more about that!", "Let's catch up again soon, {O}.",
        "I totally agree, we should plan something.", "Thanks for asking, I'm doing well.",
        "It was a long day but I feel good about it.", "Honestly I just needed a quiet weekend."]


def _date(day: dt.date, rng: random.Random) -> str:
    hour, minute = rng.randint(1, 11), rng.choice([0, 15, 30, 45])
    return f"{hour}:{minute:02d} {rng.choice(['am', 'pm'])} on {day.day} {day:%B}, {day.year}"


def generate_conversations(n: int = 6, sessions: int = 5, seed: int = 1) -> list[dict[str, Any]]:
    """``n`` LoCoMo-format samples (``sample_id``, ``conversation``, ``qa``) from ``seed``."""
    rng = random.Random(seed)
    samples = []
    for c in range(n):
        a, b = rng.sample(NAMES, 2)
        conv: dict[str, Any] = {"speaker_a": a, "speaker_b": b}
        qa: list[dict[str, Any]] = []
        day = dt.date(2023, rng.randint(1, 6), rng.randint(1, 28))
        events = rng.sample(EVENTS, k=min(len(EVENTS), 2 * sessions))
        facts: list[tuple[str, str, str, str]] = []  # (speaker, answer, dia, date)
        for s in range(1, sessions + 1):
            when = _date(day, rng)
            conv[f"session_{s}_date_time"] = when
            turns: list[dict[str, str]] = []

            def say(who: str, text: str, turns: list[dict[str, str]] = turns, s: int = s) -> str:
                dia = f"D{s}:{len(turns) + 1}"
                turns.append({"speaker": who, "dia_id": dia, "text": text})
                return dia

            mine = events[2 * (s - 1): 2 * s]
            for i in range(10):
                who, other = (a, b) if i % 2 == 0 else (b, a)
                say(who, rng.choice(CHAT).format(O=other))
                if i in (2, 6) and mine:
                    fact, echo, question, slot, values, verb = mine.pop()
                    speaker, friend = rng.choice([(a, b), (b, a)])
                    value = rng.choice(values)
                    filled = fact.format(X=value if slot == "X" else rng.choice(["kitten", "puppy"]),
                                         Y=value)
                    dia = say(speaker, filled)
                    say(friend, echo)
                    qa.append({"question": question.format(S=speaker), "answer": value,
                               "evidence": [dia], "category": 4})
                    qa.append({"question": f"When did {speaker} {verb}?",
                               "answer": when.split(" on ")[1], "evidence": [dia], "category": 2})
                    qa.append({"question": question.format(S=friend), "adversarial_answer": value,
                               "evidence": [dia], "category": 5})
                    facts.append((speaker, value, dia, verb))
            conv[f"session_{s}"] = turns
            day += dt.timedelta(days=rng.randint(5, 20))
        for (s1, v1, d1, p1), (s2, v2, d2, p2) in zip(facts[::2], facts[1::2], strict=False):
            qa.append({"question": f"Did {s1} {p1}, and did {s2} {p2}? Say what each was.",
                       "answer": f"{v1}, {v2}", "evidence": [d1, d2], "category": 1})
        samples.append({"sample_id": f"synth-{seed}-{c + 1}", "conversation": conv, "qa": qa})
    return samples
