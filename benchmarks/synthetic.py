"""Deterministic synthetic memories and queries for the benchmarks.

Short, varied sentences of the kinds an agent writes (preferences, events with
dates, tasks, facts, states, procedures), made from templates × vocabularies
with a seeded RNG: the same seed gives the same stream on every machine, and
the stream never repeats a sentence, so 100,000 memories are 100,000 distinct
texts. Queries are written from separate templates over the same vocabularies,
so they read like questions a user asks rather than copies of stored text.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

NAMES = (
    "Alice", "Bob", "Priya", "Wei", "Carlos", "Fatima", "Hiro", "Olga", "Kwame", "Lena", "Mateo", "Aisha",
    "Jonas", "Mei", "Ravi", "Sofia", "Tom", "Yara", "Ivan", "Nadia", "Omar", "Chloe", "Diego", "Hana",
    "Lucas", "Amara", "Felix", "Ingrid", "Kenji", "Zoe", "Pablo", "Greta", "Tariq", "Elena", "Noah",
    "Leila", "Sam", "Marta", "Arjun", "Beatriz", "Ethan", "Sakura", "Malik", "Clara", "Viktor", "Rosa",
    "Daniel", "Anya", "Hugo", "Imani", "Oscar", "Freya", "Rahul", "Julia", "Emil", "Lucia", "Kofi", "Nora",
    "Andrei", "Maya",
)  # fmt: skip
SURNAMES = (
    "Moreno", "Chen", "Okafor", "Schmidt", "Tanaka", "Silva", "Novak", "Haddad", "Larsen", "Kowalski",
    "Mensah", "Rossi", "Ivanova", "Dubois", "Nakamura", "Patel", "Garcia", "Andersen", "Kim", "Oliveira",
    "Murphy", "Yilmaz", "Fischer", "Nguyen", "Hansen", "Costa", "Bauer", "Sato", "Ahmed", "Walsh",
    "Lindqvist", "Mwangi", "Romero", "Petrov", "Jansen", "Hoffmann", "Reyes", "Kaur", "Brennan", "Varga",
)  # fmt: skip
DRINKS = (
    "green tea", "black coffee", "oat milk latte", "espresso", "sparkling water", "chai", "hot chocolate",
    "peppermint tea", "orange juice", "kombucha", "matcha", "flat white", "iced americano", "rooibos",
    "lemonade", "cold brew", "jasmine tea", "decaf cappuccino",
)  # fmt: skip
DAYPARTS = ("morning", "afternoon", "evening", "late night", "lunch break", "weekend")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
HOBBIES = (
    "go running", "play chess", "bake sourdough", "practise the piano", "read science fiction",
    "go bouldering", "paint watercolours", "swim laps", "watch old films", "do yoga", "go cycling",
    "play board games", "write poetry", "garden", "learn Spanish", "play tennis", "build model trains",
    "go birdwatching", "knit scarves", "play video games", "cook Thai food", "hike in the hills",
)  # fmt: skip
FOODS = (
    "mushrooms", "olives", "spicy curry", "raw onions", "coriander", "blue cheese", "sushi", "liver",
    "anchovies", "tofu", "brussels sprouts", "licorice", "eggplant", "oysters", "beetroot", "pineapple pizza",
)  # fmt: skip
REASONS = (
    "of the texture", "it upsets the stomach", "of a bad childhood memory", "the taste is too strong",
    "of a mild intolerance", "it reminds them of hospital food", "of the smell", "it is too salty",
)  # fmt: skip
TOOLS = (
    "the editor", "the terminal", "the calendar app", "the email client", "the IDE", "the music player",
    "the note-taking app", "the browser", "the chat client", "the code formatter",
)  # fmt: skip
SETTINGS = (
    "dark mode", "a 14-point font", "tabs instead of spaces", "vim keybindings", "24-hour time",
    "compact layout", "metric units", "week starting on Monday", "autosave every minute",
    "notifications muted after 8pm", "British spelling", "high-contrast colours",
)  # fmt: skip
TRAVEL = ("take the train", "drive", "fly", "take the bus", "cycle", "carpool")
CITIES = (
    "Lisbon", "Berlin", "Tokyo", "Nairobi", "Toronto", "Mumbai", "Sao Paulo", "Seoul", "Oslo", "Madrid",
    "Cairo", "Melbourne", "Chicago", "Dublin", "Hanoi", "Prague", "Lima", "Istanbul", "Vienna", "Austin",
    "Singapore", "Edinburgh", "Montreal", "Zurich", "Kyoto", "Cape Town", "Warsaw", "Bogota",
)  # fmt: skip
PLACES = (
    "a ramen bar", "the climbing gym", "the office cafeteria", "a jazz club", "the farmers market",
    "the airport lounge", "a bookshop", "the conference hall", "a rooftop bar", "the public library",
    "a tapas restaurant", "the park", "the co-working space", "a museum cafe",
)  # fmt: skip
PURPOSES = (
    "customer workshop", "product launch", "family wedding", "job interview", "team offsite",
    "marathon", "medical check-up", "design review", "trade fair", "friend's birthday", "hackathon",
    "contract negotiation", "university reunion", "music festival",
)  # fmt: skip
OCCASIONS = ("a birthday", "an anniversary", "a promotion", "graduation", "a housewarming", "New Year")
RELATIONS = ("sister", "brother", "cousin", "manager", "neighbour", "partner", "colleague", "mentor", "friend")
APPOINTMENTS = ("dentist", "doctor", "physiotherapy", "haircut", "eye test", "car service", "visa", "bank")
CHORES = (
    "renew the passport", "pay the electricity bill", "water the plants", "book a table for Friday",
    "call the landlord", "back up the laptop", "order printer ink", "return the library books",
    "buy a birthday present", "file the expense report", "update the insurance", "fix the bike brakes",
    "cancel the gym membership", "schedule the boiler check", "send the tax documents", "pick up the dry cleaning",
)  # fmt: skip
WORK_TASKS = (
    "write the design doc", "review the pull requests", "prepare the quarterly slides",
    "migrate the database", "update the API documentation", "fix the login bug", "run the load tests",
    "draft the release notes", "interview two candidates", "clean up the backlog", "rotate the API keys",
    "benchmark the search service", "refactor the billing module", "set up the staging server",
)  # fmt: skip
PROJECTS = (
    "Atlas", "Borealis", "Cobalt", "Dune", "Ember", "Falcon", "Granite", "Helix", "Iris", "Juniper",
    "Kestrel", "Lumen", "Meridian", "Nova", "Orchid", "Pioneer", "Quartz", "Ripple",
)  # fmt: skip
FAVORS = (
    "help move furniture", "proofread the thesis", "lend the camera", "walk the dog", "share the slides",
    "introduce them to the recruiter", "drive them to the airport", "test the new app",
)  # fmt: skip
JOBS = (
    "nurse", "data engineer", "architect", "teacher", "chef", "pilot", "lawyer", "pharmacist", "journalist",
    "firefighter", "veterinarian", "accountant", "graphic designer", "electrician", "physiotherapist",
)  # fmt: skip
ALLERGENS = ("peanuts", "shellfish", "penicillin", "cats", "pollen", "gluten", "latex", "bee stings", "dust mites")
COLORS = ("red", "blue", "silver", "black", "white", "green", "grey", "yellow")
CARS = ("hatchback", "station wagon", "pickup truck", "electric sedan", "minivan", "convertible", "SUV")
LANGUAGES = ("Portuguese", "German", "Japanese", "Swahili", "French", "Hindi", "Korean", "Italian", "Arabic")
PETS = ("dog", "cat", "parrot", "rabbit", "tortoise", "hamster", "goldfish")
PET_NAMES = ("Biscuit", "Luna", "Pepper", "Milo", "Shadow", "Mochi", "Ziggy", "Nala", "Olive", "Rocket", "Pixel")
STATES = (
    "working from home", "recovering from a cold", "on parental leave", "training for a half marathon",
    "between jobs", "on a low-sugar diet", "studying for an exam", "travelling without a laptop",
)  # fmt: skip
CAUSES = (
    "a busy quarter", "the office renovation", "a sprained ankle", "the new baby", "a doctor's advice",
    "the team reorganisation", "moving house", "a long trip",
)  # fmt: skip
DEVICES = ("laptop", "phone", "router", "printer", "tablet", "smartwatch", "car")
DEVICE_STATES = ("broken", "in repair", "running slowly", "out of warranty", "being replaced", "offline")
GOALS = (
    "make pour-over coffee", "deploy the website", "reset the router", "file a reimbursement",
    "bake bread", "book a meeting room", "restore a backup", "change a bike tyre", "onboard a new hire",
    "submit a timesheet", "clean the espresso machine", "publish a release",
)  # fmt: skip
STEPS = (
    "checks the logs", "reads the checklist", "takes a snapshot", "asks on the team channel",
    "warms the kettle to 94 degrees", "runs the test suite", "unplugs everything for thirty seconds",
    "fills in the form", "tags the commit", "weighs the flour", "updates the changelog",
    "confirms with the manager", "rinses the parts", "opens a ticket",
)  # fmt: skip
SERVICES = ("the payments API", "the search cluster", "the mobile backend", "the data pipeline", "the web frontend")
TIMES = ("8:30", "9:00", "10:15", "11:45", "13:00", "14:30", "16:00", "17:45", "19:00")
YEARS = tuple(str(year) for year in range(2005, 2026))


@dataclass(frozen=True, slots=True)
class SyntheticMemory:
    content: str
    category: str
    entities: tuple[str, ...]
    created_at: datetime


def _a(phrase: str) -> str:
    article = "an" if phrase[0] in "aeioAEIO" or (phrase[0] == "u" and not phrase.startswith("uni")) else "a"
    return f"{article} {phrase}"


def _date(rng: random.Random) -> str:
    day = datetime(2024, 1, 1) + timedelta(days=rng.randrange(730))
    return f"{day:%B} {day.day}, {day.year}"


def _person(rng: random.Random) -> str:
    return f"{rng.choice(NAMES)} {rng.choice(SURNAMES)}"


def _two_names(rng: random.Random) -> tuple[str, str]:
    first, second = _person(rng), _person(rng)
    while second == first:
        second = _person(rng)
    return first, second


def _preference(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    name = _person(rng)
    kind = rng.randrange(6)
    if kind == 0:
        first, second = rng.sample(DRINKS, 2)
        text = f"{name} prefers {first} over {second} in the {rng.choice(DAYPARTS)}"
    elif kind == 1:
        text = f"{name} likes to {rng.choice(HOBBIES)} on {rng.choice(WEEKDAYS)} {rng.choice(DAYPARTS)}s"
    elif kind == 2:
        text = f"{name} dislikes {rng.choice(FOODS)} because {rng.choice(REASONS)}"
    elif kind == 3:
        text = f"{name} wants {rng.choice(TOOLS)} to use {rng.choice(SETTINGS)} by default"
    elif kind == 4:
        first, second = rng.sample(TRAVEL, 2)
        text = f"{name} would rather {first} than {second} when going to {rng.choice(CITIES)}"
    else:
        text = f"{name} always orders {rng.choice(DRINKS)} at {rng.choice(PLACES)} in {rng.choice(CITIES)}"
    return text, (name,)


def _event(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    kind = rng.randrange(4)
    if kind == 0:
        name, other = _two_names(rng)
        text = f"{name} met {other} at {rng.choice(PLACES)} in {rng.choice(CITIES)} on {_date(rng)}"
        return text, (name, other)
    name = _person(rng)
    if kind == 1:
        text = f"On {_date(rng)}, {name} flew to {rng.choice(CITIES)} for {_a(rng.choice(PURPOSES))}"
    elif kind == 2:
        text = (
            f"{name} celebrated {rng.choice(OCCASIONS)} with their {rng.choice(RELATIONS)} "
            f"at {rng.choice(PLACES)} on {_date(rng)}"
        )
    else:
        text = f"{name} has {_a(rng.choice(APPOINTMENTS))} appointment on {_date(rng)} at {rng.choice(TIMES)}"
    return text, (name,)


def _task(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    kind = rng.randrange(3)
    if kind == 0:
        name = _person(rng)
        return f"Remind {name} to {rng.choice(CHORES)} before {rng.choice(WEEKDAYS)}", (name,)
    if kind == 1:
        name, project = _person(rng), rng.choice(PROJECTS)
        text = f"{name} needs to {rng.choice(WORK_TASKS)} for the {project} project by {_date(rng)}"
        return text, (name, project)
    name, other = _two_names(rng)
    return f"{name} promised {other} to {rng.choice(FAVORS)} next {rng.choice(WEEKDAYS)}", (name, other)


def _fact(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    kind = rng.randrange(6)
    if kind == 0:
        name, other = _two_names(rng)
        text = f"{name}'s {rng.choice(RELATIONS)} {other} works as {_a(rng.choice(JOBS))} in {rng.choice(CITIES)}"
        return text, (name, other)
    name = _person(rng)
    if kind == 1:
        text = f"{name} is allergic to {rng.choice(ALLERGENS)} and carries medication for it"
    elif kind == 2:
        text = f"{name} drives {_a(rng.choice(COLORS))} {rng.choice(CARS)} bought in {rng.choice(YEARS)}"
    elif kind == 3:
        text = f"{name} has lived in {rng.choice(CITIES)} since {rng.choice(YEARS)} and works as {_a(rng.choice(JOBS))}"
    elif kind == 4:
        first, second = rng.sample(LANGUAGES, 2)
        text = f"{name} speaks {first} at home and is learning {second}"
    else:
        text = f"{name} has {_a(rng.choice(PETS))} called {rng.choice(PET_NAMES)} adopted in {rng.choice(YEARS)}"
    return text, (name,)


def _state(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    name = _person(rng)
    if rng.randrange(2):
        return f"{name} is currently {rng.choice(STATES)} after {rng.choice(CAUSES)}", (name,)
    return f"{name}'s {rng.choice(DEVICES)} has been {rng.choice(DEVICE_STATES)} since {rng.choice(WEEKDAYS)}", (name,)


def _procedure(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    name = _person(rng)
    first, second = rng.sample(STEPS, 2)
    if rng.randrange(2):
        return f"To {rng.choice(GOALS)}, {name} first {first} and then {second}", (name,)
    return f"When deploying {rng.choice(SERVICES)}, {name} always {first}, then {second}", (name,)


_MAKERS = (
    ("preference", _preference, 22),
    ("event", _event, 24),
    ("task", _task, 16),
    ("fact", _fact, 22),
    ("state", _state, 8),
    ("procedure", _procedure, 8),
)
_WEIGHTS = [weight for _, _, weight in _MAKERS]
CATEGORIES = tuple(category for category, _, _ in _MAKERS)  # in percent: 22, 24, 16, 22, 8, 8


def memories(seed: int = 42, *, now: datetime | None = None, span_days: int = 400) -> Iterator[SyntheticMemory]:
    """An endless stream of distinct memories; ``created_at`` spread over ``span_days`` before ``now``."""
    rng = random.Random(seed)
    now = now or datetime.now(UTC)
    seen: set[str] = set()
    while True:
        category, make, _ = rng.choices(_MAKERS, weights=_WEIGHTS)[0]
        text, entities = make(rng)
        key = text.casefold()
        age = timedelta(seconds=rng.randrange(span_days * 86_400))
        if key in seen:
            continue
        seen.add(key)
        yield SyntheticMemory(text, category, entities, now - age)


_QUESTIONS = (
    lambda r: f"What does {_who(r)} like to drink in the {r.choice(DAYPARTS)}?",
    lambda r: f"What does {_who(r)} do for fun on {r.choice(WEEKDAYS)}s?",
    lambda r: f"Which foods does {_who(r)} avoid?",
    lambda r: f"How should I configure {r.choice(TOOLS)} for {_who(r)}?",
    lambda r: f"How does {_who(r)} prefer to travel to {r.choice(CITIES)}?",
    lambda r: f"Who did {_who(r)} meet in {r.choice(CITIES)}?",
    lambda r: f"When did {_who(r)} go to {r.choice(CITIES)} for the {r.choice(PURPOSES)}?",
    lambda r: f"When is {_who(r)}'s {r.choice(APPOINTMENTS)} appointment?",
    lambda r: f"What should {_who(r)} do before {r.choice(WEEKDAYS)}?",
    lambda r: f"What is left to do on the {r.choice(PROJECTS)} project?",
    lambda r: f"Who has to {r.choice(WORK_TASKS)}?",
    lambda r: f"What did {_who(r)} promise to do for a friend?",
    lambda r: f"Who works as {_a(r.choice(JOBS))}?",
    lambda r: f"Is {_who(r)} allergic to anything?",
    lambda r: f"What car does {_who(r)} drive?",
    lambda r: f"Which languages does {_who(r)} speak?",
    lambda r: f"What is the name of {_who(r)}'s {r.choice(PETS)}?",
    lambda r: f"Why is {_who(r)} {r.choice(STATES)}?",
    lambda r: f"Is {_who(r)}'s {r.choice(DEVICES)} working again?",
    lambda r: f"How do we {r.choice(GOALS)}?",
    lambda r: f"What are the steps for deploying {r.choice(SERVICES)}?",
    lambda r: f"Where does {_who(r)} usually get {r.choice(DRINKS)}?",
    lambda r: f"Who lives in {r.choice(CITIES)}?",
    lambda r: f"anything about {_who(r)} and {r.choice(HOBBIES)}",
    lambda r: f"{_who(r)} {r.choice(FOODS)}",
    lambda r: f"what happened on {_date(r)}",
    lambda r: f"Who is recovering or {r.choice(STATES)} right now?",
)


def _who(rng: random.Random) -> str:
    # Mostly the full name, as stored; sometimes only the first name, as people ask.
    return _person(rng) if rng.random() < 0.8 else rng.choice(NAMES)


def queries(count: int, seed: int = 7) -> list[str]:
    """``count`` distinct recall queries (questions and keyword-style searches)."""
    rng = random.Random(seed)
    found: dict[str, None] = {}
    while len(found) < count:
        found.setdefault(rng.choice(_QUESTIONS)(rng), None)
    return list(found)
