"""Template data for the synthetic weekly fact corpus: vocabularies, fact templates, queries.

Every fact template of a topic contains a word of that topic's marker vocabulary, so a topic
query's expected substrings are exactly that vocabulary.
"""

from __future__ import annotations

VOCAB: dict[str, list[str]] = {
    "NAME": ["Jordan", "Marisol", "Kenji", "Oluwaseun", "Birgit", "Rafael", "Noor", "Declan"],
    "FOOD": [
        "pad thai",
        "ramen",
        "shakshuka",
        "mushroom risotto",
        "pho",
        "falafel",
        "bibimbap",
        "lasagna",
    ],
    "TECH": ["Python", "TypeScript", "Rust", "Kubernetes", "Postgres", "Terraform", "Kafka"],
    "AMOUNT": ["$45", "$120", "$380", "$1,200", "$75", "$640", "$2,300"],
    "PLACE": ["Lisbon", "Kyoto", "Oaxaca", "Tromsø", "Marrakesh", "Valparaíso", "Ljubljana"],
    "EXERCISE": ["run", "yoga", "gym", "swim", "bike ride", "hike", "pilates"],
    "BOOK": [
        "Piranesi",
        "The Overstory",
        "Station Eleven",
        "Braiding Sweetgrass",
        "Klara and the Sun",
    ],
    "SHOW": ["Severance", "Slow Horses", "Shogun", "The Bear", "Andor"],
    "SYMPTOM": ["headache", "sore throat", "back pain", "allergies", "insomnia"],
    "HOBBY": ["pottery", "watercolor", "chess", "sourdough", "guitar", "birdwatching"],
    "ROOM": ["kitchen", "balcony", "bathroom", "garage", "bedroom"],
    "STORE": ["IKEA", "REI", "Costco", "Uniqlo", "Best Buy"],
    "SKILL": ["Spanish", "Japanese", "statistics", "woodworking", "public speaking"],
    "MINUTES": ["20", "35", "45", "60", "90"],
}

# topic -> (marker slot, fact templates)
TOPICS: dict[str, tuple[str, list[str]]] = {
    "exercise": (
        "EXERCISE",
        [
            "Went for a {MINUTES}-minute {EXERCISE} on {DATE}",
            "Did a {EXERCISE} session with {NAME} before work in week {WEEK}",
            "My knees felt fine after the {EXERCISE} on {DATE}",
            "Skipped the {EXERCISE} on {DATE} because of rain",
            "Signed up for a {EXERCISE} class that costs {AMOUNT} a month",
        ],
    ),
    "food": (
        "FOOD",
        [
            "Had {FOOD} for dinner on {DATE}",
            "Cooked {FOOD} for {NAME} on {DATE}",
            "Tried a new {FOOD} place near the office in week {WEEK}",
            "Ordered {FOOD} for lunch and it cost {AMOUNT}",
            "Learned to make {FOOD} from a video on {DATE}",
        ],
    ),
    "work": (
        "TECH",
        [
            "Spent most of {DATE} debugging a {TECH} service",
            "Paired with {NAME} on the {TECH} migration in week {WEEK}",
            "Gave a short talk about {TECH} at the team sync on {DATE}",
            "The {TECH} upgrade shipped to production on {DATE}",
            "Reviewed {NAME}'s pull request touching the {TECH} config",
        ],
    ),
    "finance": (
        "AMOUNT",
        [
            "Paid {AMOUNT} for the electricity bill on {DATE}",
            "Moved {AMOUNT} into the savings account in week {WEEK}",
            "Lent {NAME} {AMOUNT} for concert tickets",
            "The car insurance renewal came to {AMOUNT}",
            "Got a refund of {AMOUNT} from the airline on {DATE}",
        ],
    ),
    "travel": (
        "PLACE",
        [
            "Booked flights to {PLACE} for the spring trip",
            "{NAME} recommended a guesthouse in {PLACE}",
            "Looked at photos from the {PLACE} trip on {DATE}",
            "Started planning a week in {PLACE} with a budget of {AMOUNT}",
            "Renewed my passport before going to {PLACE}",
        ],
    ),
    "media": (
        "BOOK",
        [
            "Finished reading {BOOK} on {DATE}",
            "Started {BOOK} on the train in week {WEEK}",
            "{NAME} lent me a copy of {BOOK}",
            "Book club picked {BOOK} for next month",
            "Watched two episodes of {SHOW} after finishing a chapter of {BOOK}",
        ],
    ),
    "health": (
        "SYMPTOM",
        [
            "Woke up with a {SYMPTOM} on {DATE}",
            "The doctor said the {SYMPTOM} should clear up in a week",
            "Took the afternoon off on {DATE} because of a {SYMPTOM}",
            "Bought medicine for {SYMPTOM} that cost {AMOUNT}",
            "Told {NAME} about the {SYMPTOM} that kept me up in week {WEEK}",
        ],
    ),
    "hobby": (
        "HOBBY",
        [
            "Spent Saturday on {HOBBY} for three hours",
            "Joined a {HOBBY} group that meets on {DATE}",
            "{NAME} and I did {HOBBY} together in week {WEEK}",
            "Bought new {HOBBY} supplies for {AMOUNT}",
            "Posted my latest {HOBBY} project on {DATE}",
        ],
    ),
    "home": (
        "ROOM",
        [
            "Repainted the {ROOM} on {DATE}",
            "The {ROOM} faucet started leaking in week {WEEK}",
            "{NAME} helped me reorganise the {ROOM}",
            "Spent {AMOUNT} on new lights for the {ROOM}",
            "Deep-cleaned the {ROOM} on {DATE}",
        ],
    ),
    "shopping": (
        "STORE",
        [
            "Picked up groceries at {STORE} on {DATE}",
            "Returned a jacket to {STORE} in week {WEEK}",
            "Spent {AMOUNT} at {STORE} on {DATE}",
            "{NAME} found a great deal at {STORE}",
            "Ordered a desk lamp from {STORE}",
        ],
    ),
    "learning": (
        "SKILL",
        [
            "Practised {SKILL} for {MINUTES} minutes on {DATE}",
            "Signed up for an evening course in {SKILL}",
            "{NAME} is helping me study {SKILL}",
            "Passed the first {SKILL} quiz in week {WEEK}",
            "Bought a {SKILL} workbook for {AMOUNT}",
        ],
    ),
    "tv": (
        "SHOW",
        [
            "Binge-watched {SHOW} on {DATE}",
            "{NAME} keeps telling me to watch {SHOW}",
            "Finished the latest season of {SHOW} in week {WEEK}",
            "Argued with {NAME} about the ending of {SHOW}",
            "Started rewatching {SHOW} on {DATE}",
        ],
    ),
}

PREFERENCES = [
    "Prefer {FOOD} over other lunch options",
    "I like to work in {TECH} more than anything else",
    "Would rather {EXERCISE} in the morning than the evening",
    "My favourite weekend activity is {HOBBY}",
    "I prefer buying household things at {STORE}",
    "I'd choose {PLACE} for a long holiday",
    "I enjoy audiobooks like {BOOK} on long drives",
    "Prefer quiet evenings with {SHOW} over going out",
    "I like learning {SKILL} with flashcards",
    "I prefer to keep at least {AMOUNT} in the checking account",
    "I like working from the {ROOM} on Fridays",
    "Prefer slow novels like {BOOK} before bed",
]
ENTITIES = [
    "{NAME} is on the platform team and owns the {TECH} stack",
    "{NAME} from the {HOBBY} group lives near the park",
    "{NAME} is my running partner who prefers to {EXERCISE} on Sundays",
    "{NAME} organises the book club that is reading {BOOK}",
]
DECISIONS = [
    "Decided to switch the backend to {TECH}",
    "Decided to cap eating out at {AMOUNT} a month",
    "Decided to take the {PLACE} trip in autumn instead",
    "Decided to drop {HOBBY} until the project ships",
    "Decided to study {SKILL} every weekday morning",
]

EDGE_FACTS = [
    ("family", "My sister Ingrid lives in Halifax and works as a marine biologist"),
    ("family", "Dad Walter is a retired carpenter living in Duluth"),
    ("family", "Mom Beatriz teaches piano in Tucson"),
    ("family", "My brother Casimir has twin daughters named Wren and Juniper"),
    ("friends", "Tobias is my oldest friend from university in Edinburgh"),
    ("friends", "Ayesha is my climbing friend and a pediatric nurse"),
    ("colleagues", "Gunnar is my manager's manager and runs the data org"),
    ("pets", "Our cat Miso is a twelve-year-old tabby"),
    ("pets", "Our dog Pepper is a border collie who loves frisbee"),
    ("family", "Grandma Rosalind turns ninety in August"),
]

# chain id -> subject label and (week, fact) versions; later versions supersede earlier ones
EVOLUTION: dict[str, list[tuple[int, str]]] = {
    "friend_city": [
        (0, "Tobias lives in a flat in Glasgow"),
        (2, "Tobias moved to Reykjavik last month for a new job"),
    ],
    "job": [
        (0, "I work at Northwind as a data analyst"),
        (3, "I started a new role at Lumenfield as a product manager"),
    ],
    "car": [(0, "I drive an old Subaru Outback"), (1, "I sold the car and bought a Rivian pickup")],
    "manager": [
        (0, "My manager is Henrietta, who runs weekly one-on-ones"),
        (1, "My manager is now Evander since the reorg"),
    ],
    "gym": [
        (0, "My gym membership is at Ironworks downtown"),
        (2, "I cancelled the gym and joined Cragline bouldering instead"),
    ],
    "apartment": [
        (0, "I rent a one-bedroom on Larkspur Avenue"),
        (3, "We signed a lease for a townhouse on Quarry Lane"),
    ],
}

DUPLICATES = [
    ("Dropped off the recycling on {DATE}", "Took the recycling out on {DATE}"),
    (
        "Called {NAME} to catch up in week {WEEK}",
        "Had a catch-up phone call with {NAME} in week {WEEK}",
    ),
    ("The {ROOM} light bulb burned out", "Need to replace the burned-out bulb in the {ROOM}"),
    ("Paid {AMOUNT} for the parking ticket", "The parking ticket cost me {AMOUNT}"),
    ("Watered the balcony plants on {DATE}", "Gave the plants on the balcony some water on {DATE}"),
    ("{NAME} sent me a link about {TECH}", "Got a {TECH} article from {NAME}"),
    ("Renewed the library card on {DATE}", "My library card was renewed on {DATE}"),
    ("Made {FOOD} for the neighbours", "The neighbours got some of my {FOOD}"),
]
CONTRADICTIONS = [
    (
        "{NAME} says the quarterly launch is on track",
        "{NAME} says the quarterly launch slipped again",
    ),
    ("I love cooking {FOOD}", "I'm tired of {FOOD} and won't cook it again"),
    ("The {TECH} rollout went smoothly", "The {TECH} rollout had to be rolled back"),
    ("I think {PLACE} is too expensive to visit", "{PLACE} turned out cheaper than expected"),
    ("{NAME} is moving teams next month", "{NAME} decided to stay on the team after all"),
    ("The {ROOM} renovation is finished", "The {ROOM} renovation still needs another week"),
]

TOPIC_QUERIES: dict[str, list[str]] = {
    "exercise": [
        "What exercise did I do?",
        "How have I been staying active?",
        "Did I work out recently?",
        "What workouts are in my routine?",
    ],
    "food": [
        "What did I eat for dinner?",
        "What dishes have I cooked?",
        "What food did I order?",
        "Which meals did I have lately?",
    ],
    "work": [
        "What technology did I work with?",
        "What was I debugging at work?",
        "Which systems did I migrate?",
        "What did I present at the team sync?",
    ],
    "finance": [
        "How much money did I spend?",
        "What bills did I pay?",
        "Did I save any money?",
        "What refunds did I get?",
    ],
    "travel": [
        "Where am I planning to travel?",
        "Which trips did I book?",
        "Where was my last trip?",
        "What destinations came up?",
    ],
    "media": [
        "What books did I read?",
        "What is the book club reading?",
        "Which novel did someone lend me?",
        "What book did I start on the train?",
    ],
    "health": [
        "Was I sick recently?",
        "What health problems did I have?",
        "Did I see a doctor?",
        "What medicine did I buy?",
    ],
    "hobby": [
        "What hobbies do I have?",
        "What creative projects did I do?",
        "Which group did I join?",
        "What did I do on Saturday?",
    ],
    "home": [
        "What did I fix around the house?",
        "Which room did I repaint?",
        "What home repairs were needed?",
        "What did I clean?",
    ],
    "shopping": [
        "Where did I go shopping?",
        "What did I buy at the store?",
        "What did I return?",
        "Where did I get groceries?",
    ],
    "learning": [
        "What am I learning?",
        "Which course did I sign up for?",
        "What am I studying?",
        "Did I pass a quiz?",
    ],
    "tv": [
        "What shows did I watch?",
        "What series am I bingeing?",
        "Which show did we argue about?",
        "What TV did someone recommend?",
    ],
}

# (query, expected substrings) about the week-0 edge facts
OLD_MEMORY_QUERIES = [
    ("Where does my sister live?", ["Halifax", "Ingrid"]),
    ("What does Ingrid do for work?", ["marine biologist"]),
    ("What did my dad do for a living?", ["carpenter", "Walter"]),
    ("Where does Dad live?", ["Duluth"]),
    ("What does my mom teach?", ["piano", "Beatriz"]),
    ("What are my nieces called?", ["Wren", "Juniper"]),
    ("Who is my oldest friend?", ["Tobias"]),
    ("What does Ayesha do?", ["pediatric nurse"]),
    ("Who runs the data org?", ["Gunnar"]),
    ("What kind of cat do we have?", ["tabby", "Miso"]),
    ("What breed is our dog?", ["border collie", "Pepper"]),
    ("When is Grandma's birthday?", ["Rosalind", "August"]),
    ("Who do I go climbing with?", ["Ayesha"]),
    ("Does my brother have kids?", ["twin daughters", "Casimir"]),
]

# (query, expected, difficulty, kind)
ADVERSARIAL_QUERIES = [
    (
        "dinner food cooked ate meal pad thai ramen pho lasagna restaurant",
        ["pad thai", "ramen", "pho", "lasagna", "risotto", "falafel", "shakshuka", "bibimbap"],
        "easy",
        "keyword stuffing",
    ),
    ("What did Jordan help with?", ["Jordan"], "medium", "entity ambiguity"),
    ("Any jogging lately?", ["run"], "medium", "synonym mismatch"),
    ("How is Mom doing?", ["Beatriz"], "medium", "alias resolution"),
    (
        "Which books and shows did I get into?",
        ["Piranesi", "Overstory", "Station Eleven", "Severance", "Shogun", "Andor", "The Bear"],
        "medium",
        "compound",
    ),
    ("What happened in week 1?", ["week 1"], "medium", "temporal ambiguity"),
    ("What did I do at the start of January?", ["January 0", "January 1"], "medium", "temporal"),
    ("Is pottery or chess more of my thing?", ["pottery", "chess"], "medium", "comparison"),
    ("What's the deal with my throat?", ["sore throat"], "hard", "colloquial"),
    ("What did I not finish reading?", ["Started"], "hard", "negation"),
    ("Tell me something", [], "hard", "maximally vague"),
    ("What does she do for a living?", [], "hard", "pronoun confusion"),
    ("What does my oldest friend's new city look like?", ["Reykjavik"], "hard", "multi-hop"),
    (
        "Who owns the stack I'm switching the backend to?",
        ["platform team"],
        "hard",
        "multi-hop workplace",
    ),
    (
        "so uh what was that fish-doctor job my sister has",
        ["marine biologist"],
        "hard",
        "conversational",
    ),
]

# (query, chain, kind, new keywords, old keywords): current_state wants the latest version,
# change_awareness wants both
CHANGE_QUERIES = [
    ("Where does Tobias live now?", "friend_city", "current_state", ["Reykjavik"], ["Glasgow"]),
    ("Where do I work now?", "job", "current_state", ["Lumenfield"], ["Northwind"]),
    ("What car do I drive?", "car", "current_state", ["Rivian"], ["Subaru"]),
    ("Who is my manager?", "manager", "current_state", ["Evander"], ["Henrietta"]),
    ("Where do I train these days?", "gym", "current_state", ["Cragline"], ["Ironworks"]),
    ("Where do I live now?", "apartment", "current_state", ["Quarry Lane"], ["Larkspur"]),
    (
        "How has Tobias's home changed?",
        "friend_city",
        "change_awareness",
        ["Reykjavik"],
        ["Glasgow"],
    ),
    ("How did my job change?", "job", "change_awareness", ["Lumenfield"], ["Northwind"]),
    ("Did I change cars?", "car", "change_awareness", ["Rivian"], ["Subaru"]),
    (
        "Who was my manager before and after the reorg?",
        "manager",
        "change_awareness",
        ["Evander"],
        ["Henrietta"],
    ),
    ("Did I switch gyms?", "gym", "change_awareness", ["Cragline"], ["Ironworks"]),
]

NULL_QUERIES = [
    "What colour is my neighbour's roof?",
    "Did I meet the president?",
    "What is my blood type?",
    "How many goldfish do I own?",
    "When did I learn to fly a helicopter?",
    "What is my favourite opera?",
    "Which marathon did I win?",
    "What did I name my sailboat?",
    "Where did I bury the time capsule?",
    "What is my locker combination?",
]
