"""A harder generated history: a team's chat with its agent, as real conversation is hard.

What bench/corpus.py lacks, and a real long conversation has: the question and
its answer share few words (synonyms: "vacation" asked, "trip" or nothing said;
"bought" asked, "picked up" said); an answer is often the second of two turns
(one person asks "how was the trip, priya?", priya answers "lisbon! six days of
sun" in the next turn, naming neither the trip nor the question's words); a fact
is split over two turns ("we adopted a puppy" ... "biscuit chewed my shoes");
several speakers talk about each other; sessions are dated; near misses name a
subject without its fact. Life and work alike: trips, pets, jobs, hobbies,
purchases, injuries, favourites, and the team's dates, owners and decisions.

Held-out split: every list of templates (statements, two-turn exchanges,
questions) is cut in two by position; `generate(..., split="tune")` uses the
even ones, "held-out" the odd ones, "all" both. The ranker is tuned on "tune"
with seeds of its own and reported on "held-out" (docs/performance.md), so the
wording it is judged on was never seen while choosing its settings. Not a
public benchmark and built from none: the words and templates are this file's own.
"""

from __future__ import annotations

import random
import re

from .corpus import MONTHS, PEOPLE, PROJECTS, SERVICES, TOOLS, Corpus, Question, Turn, _ordinal

# Ways of saying one thing: a template's {UPPER} slot takes one at random, each time, so a
# question and its answer choose their words independently.
SYN = {
    "TRIP": ("trip", "vacation", "holiday", "getaway", "time off", "break"),
    "WENT": ("went to", "visited", "travelled to", "flew to", "spent a week in", "ended up in"),
    "ADOPT": ("adopted", "got", "brought home", "rescued", "took in"),
    "JOB": ("job", "position", "role", "work"),
    "STARTED": ("started at", "joined", "began working at", "got hired by", "signed with"),
    "HOBBY": ("hobby", "pastime", "new thing", "weekend thing"),
    "TOOKUP": ("took up", "started", "got into", "picked up", "has been learning"),
    "BOUGHT": ("bought", "purchased", "got", "picked up", "ordered", "treated herself to"),
    "HURT": ("hurt", "injured", "sprained", "twisted", "banged up"),
    "LOVES": ("loves", "can't stop talking about", "recommends", "is obsessed with", "keeps quoting"),
    "DATE": ("date", "day", "when"),
    "IN_CHARGE": ("in charge of", "running", "leading", "responsible for", "owning", "driving"),
    "CHOSE": ("chose", "picked", "went with", "settled on", "decided on", "opted for"),
    "PUT": ("put", "left", "stashed", "keeps", "stored"),
    "NICE": ("amazing", "great", "lovely", "fantastic", "so good", "wonderful"),
}
OCCASIONS = ("summer", "spring", "winter", "christmas", "birthday", "anniversary", "easter", "autumn")
CITIES = (
    "lisbon",
    "kyoto",
    "oaxaca",
    "reykjavik",
    "marrakech",
    "krakow",
    "hanoi",
    "cusco",
    "tbilisi",
    "valparaiso",
    "porto",
    "ljubljana",
    "tallinn",
    "havana",
    "zanzibar",
    "seville",
    "bergen",
    "hobart",
    "cartagena",
    "sapporo",
    "dubrovnik",
    "penang",
    "quebec",
    "salzburg",
    "mendoza",
    "galway",
    "matera",
    "hoi an",
    "bruges",
    "tromso",
)
SPECIES = {
    "dog": ("dog", "puppy", "pup"),
    "cat": ("cat", "kitten"),
    "rabbit": ("rabbit", "bunny"),
    "parrot": ("parrot", "bird"),
    "tortoise": ("tortoise", "turtle"),
    "hamster": ("hamster", "little furball"),
}
PET_NAMES = (
    "biscuit",
    "pepper",
    "luna",
    "milo",
    "nova",
    "juniper",
    "olive",
    "pickles",
    "mochi",
    "ziggy",
    "clementine",
    "otis",
    "hazel",
    "tofu",
    "waffles",
    "rusty",
    "poppy",
    "bramble",
    "sprout",
    "noodle",
    "maple",
    "ember",
    "fig",
    "basil",
    "cosmo",
    "pixel",
    "gus",
    "marlowe",
    "peaches",
    "bean",
)
RELATIONS = ("", "sister", "brother", "partner", "dad", "mum", "cousin")
ORGS = tuple(
    f"{a} {b}"
    for a in (
        "harbor",
        "northwind",
        "bluefield",
        "copperleaf",
        "brightpath",
        "stonebridge",
        "redwood",
        "silverline",
        "oakmont",
        "clearwater",
    )
    for b in ("clinic", "logistics", "bakery", "studios", "labs", "library", "records", "robotics")
)
HOBBIES = (
    "pottery",
    "bouldering",
    "birdwatching",
    "sourdough baking",
    "woodworking",
    "salsa dancing",
    "chess",
    "calligraphy",
    "beekeeping",
    "kayaking",
    "knitting",
    "archery",
    "fencing",
    "watercolours",
    "improv theatre",
    "rock tumbling",
    "bonsai",
    "fermenting hot sauce",
)
GOODS = {
    "car": (
        ("car", "vehicle", "new ride"),
        ("volvo estate", "used prius", "vintage beetle", "little fiat", "skoda wagon"),
    ),
    "bike": (("bike", "bicycle"), ("gravel bike", "cargo bike", "fixie", "e-bike", "tandem")),
    "laptop": (("laptop", "computer", "machine"), ("thinkpad x1", "framework laptop", "macbook air", "chromebook")),
    "camera": (("camera",), ("fujifilm x100", "old leica", "polaroid", "gopro")),
    "instrument": (("instrument",), ("telecaster", "ukulele", "cello", "drum kit", "banjo")),
    "sofa": (("sofa", "couch"), ("velvet sofa", "corner couch", "futon", "chesterfield")),
}
SPORTS = ("football", "skiing", "climbing", "running", "cycling", "tennis", "volleyball", "surfing", "yoga", "squash")
BODY = ("ankle", "wrist", "knee", "shoulder", "lower back", "elbow", "hamstring", "thumb")
MEDIA = {
    "book": ("book", "novel", "read"),
    "show": ("show", "series"),
    "film": ("film", "movie"),
    "album": ("album", "record"),
    "podcast": ("podcast",),
}
TITLE_A = (
    "glass",
    "silent",
    "paper",
    "hollow",
    "northern",
    "velvet",
    "burning",
    "quiet",
    "salt",
    "iron",
    "lantern",
    "winter",
    "copper",
    "crooked",
    "midnight",
)
TITLE_B = (
    "orchard",
    "lighthouse",
    "cartographer",
    "garden",
    "harbour",
    "circus",
    "archive",
    "river",
    "kingdom",
    "compass",
    "atlas",
    "choir",
    "engine",
    "meridian",
)
EVENTS = {
    "launch": ("launch", "release", "go-live", "rollout", "ship date"),
    "migration": ("migration", "move", "cutover", "switch-over"),
    "upgrade": ("upgrade", "update", "version bump"),
    "audit": ("audit", "review", "security check"),
    "demo": ("demo", "showcase", "presentation"),
}
AREAS = ("on-call rota", "budget", "hiring", "roadmap", "vendor contract", "incident reviews", "onboarding docs")
PURPOSES = ("log shipping", "secrets", "monitoring", "ci", "alerting", "dns", "ticketing", "load balancing", "backups")
ITEMS = (
    "spare keys",
    "laptop charger",
    "yubikey",
    "router manual",
    "hdmi adapter",
    "label printer",
    "rack key",
    "installer usb stick",
    "passport",
    "tripod",
    "headphones",
)
PLACES = (
    "the top drawer of the blue cabinet",
    "the box under the desk",
    "the server closet",
    "the kitchen shelf",
    "the safe",
    "the glovebox of the van",
    "the shoebox in the hallway",
    "the grey backpack",
    "the filing cabinet by the window",
)
ACKS = (
    "Noted.",
    "Got it.",
    "Nice!",
    "Oh, lovely.",
    "Thanks for telling me.",
    "Good to know.",
    "Ha, sounds about right.",
    "I'll remember that.",
    "OK.",
    "🙂",
    "That's great news.",
    "Sounds fun.",
)


class Kind:
    """One kind of fact: its subject, its values, and its templates. In a template, {p} is
    the subject person (or project), {x} the subject's second part as said, {v} the value,
    {o} another person; {UPPER} is a word of SYN (or of the subject's own synonyms, {X})."""

    name = ""
    told: tuple[str, ...] = ()  # said by the person themself (or by anyone, for the team's kinds)
    reported: tuple[str, ...] = ()  # said by someone else about the person
    asked: tuple[tuple[str, str], ...] = ()  # two turns: someone asks (naming the subject), the person answers
    split: tuple[tuple[str, str], ...] = ()  # two turns by the person: the subject, then the value alone
    questions: tuple[str, ...] = ()
    near: tuple[str, ...] = ()  # the subject named, its fact not
    personal = True

    def __init__(self, r: random.Random) -> None:
        self.r = r

    def subject(self) -> tuple:
        raise NotImplementedError

    def value(self, subject: tuple) -> str:
        raise NotImplementedError

    def synonyms(self, subject: tuple) -> tuple[str, ...]:
        """The ways of saying the subject's second part ({X})."""
        return (str(subject[1]),)


class Trip(Kind):
    name = "trip"
    told = (
        "just got back from {v}, what a {TRIP}",
        "{v} was {NICE}, the food alone was worth the flight",
        "spent the whole {x} {TRIP} in {v} and barely checked my phone",
        "booked it: {v} for my {x} {TRIP}",
        "we {WENT} {v} for {x}, still sunburnt",
        "if anyone wants tips for {v}, ask me, I was just there",
    )
    reported = (
        "{p} is off to {v} for a week",
        "did you see {p}'s photos from {v}? gorgeous",
        "{p} won't be around, they're in {v} until monday",
        "{p} {WENT} {v} over {x}, lucky them",
    )
    asked = (
        ("{p}, how was the {x} {TRIP}?", "{v}! loved every minute of it"),
        ("where did you end up going for {x}, {p}?", "we did {v} in the end, rained twice but still {NICE}"),
        ("{p} did you have a good {TRIP}?", "the best, {v} is {NICE} this time of year"),
        ("how was your {x} {p}?", "quiet, a few days in {v} with no laptop"),
    )
    split = (
        ("finally took that {x} {TRIP} we kept talking about", "{v} has the best coffee I've ever had"),
        ("back from the {TRIP}, my legs are destroyed", "{v} is all hills, nobody warned me"),
    )
    questions = (
        "where did {p} go on {x} {TRIP}?",
        "which city did {p} visit over {x}?",
        "where did {p} spend the {x} {TRIP}?",
        "what place did {p} travel to for {x}?",
        "where was {p}'s {x} {TRIP}?",
        "which destination did {p} pick for {x}?",
    )
    near = (
        "{p} keeps talking about a {x} {TRIP}",
        "I need a {TRIP} too, like {p}",
        "{p}, any plans for {x}?",
        "{p} said the {x} {TRIP} is still undecided",
    )

    def subject(self):
        return (self.r.choice(PEOPLE), self.r.choice(OCCASIONS))

    def value(self, subject):
        return self.r.choice(CITIES)


class Pet(Kind):
    name = "pet"
    told = (
        "we {ADOPT} a {X} this weekend, her name is {v}",
        "meet {v}, our new {X}",
        "{v} the {X} chewed through my charger again",
        "say hi to {v}, the newest member of the family",
        "took {v} to the vet, the {X} is fine",
        "{v} kept me up all night, {X} life",
    )
    reported = (
        "{p} {ADOPT} a {X} called {v}",
        "{p}'s {X} {v} was on the video call again",
        "apparently {p} named the {X} {v}",
        "{p} brought {v} to the office today",
    )
    asked = (
        ("{p}, what did you call the new {X}?", "{v}, after my grandmother's cat"),
        ("does the {X} have a name yet {p}?", "yes! {v}, she answers to it already"),
        ("how's the {X} settling in, {p}?", "{v} owns the sofa now, we just live here"),
    )
    split = (
        ("we {ADOPT} a {X} from the shelter", "{v} slept through the night for the first time"),
        ("there is a small {X} asleep on my feet", "{v} refuses to let me get up"),
    )
    questions = (
        "what is {p}'s {X} called?",
        "what name did {p} give the {X}?",
        "what's the name of {p}'s {X}?",
        "who is {p}'s new {X}?",
        "what did {p} name the {X}?",
        "what do they call {p}'s {X}?",
    )
    near = ("{p} is thinking about getting a {X}", "{p} showed me {X} pictures all lunch", "is {p} allergic to {X}s?")

    def subject(self):
        return (self.r.choice(PEOPLE), self.r.choice(sorted(SPECIES)))

    def value(self, subject):
        return self.r.choice(PET_NAMES)

    def synonyms(self, subject):
        return SPECIES[subject[1]]


class Job(Kind):
    name = "job"
    told = (
        "first week at {v} done, exhausting but good",
        "I {STARTED} {v} on monday!",
        "signed the contract with {v} today",
        "my {x} just {STARTED} {v}",
        "it's official, I work for {v} now",
        "the commute to {v} is brutal",
    )
    reported = (
        "{p} {STARTED} {v}",
        "{p}'s {x} got the {JOB} at {v}",
        "{p} left us for {v}, we'll miss them",
        "heard {p} is at {v} now",
    )
    asked = (
        ("{p}, how's the new {JOB} going?", "{v} is great so far, nice people"),
        ("{p} where did your {x} end up?", "{v}, they start next month"),
        ("any news on the {JOB} hunt, {p}?", "{v} made an offer and I took it"),
    )
    split = (
        ("I have news: I accepted an offer", "{v}, starting in two weeks"),
        ("my {x} finally found a {JOB}", "{v} of all places"),
    )
    questions = (
        "where does {p}'s {x} work now?",
        "which company hired {p}'s {x}?",
        "where did {p}'s {x} get a {JOB}?",
        "who is {p}'s {x} working for?",
        "what is {p}'s {x}'s new employer?",
        "where is {p}'s {x} employed?",
    )
    near = ("{p}'s {x} is looking for a {JOB}", "{p} mentioned a {JOB} interview", "{p}, how's the {JOB} search?")

    def subject(self):
        return (self.r.choice(PEOPLE), self.r.choice(RELATIONS))

    def value(self, subject):
        return self.r.choice(ORGS)


class Hobby(Kind):
    name = "hobby"
    told = (
        "I {TOOKUP} {v} and I'm hooked",
        "my {x} signed up for {v} classes",
        "spent saturday on {v} again",
        "{v} is so relaxing, why didn't I start sooner",
        "bought all the gear for {v}, no going back",
        "my hands hurt from {v} but it's worth it",
    )
    reported = (
        "{p} {TOOKUP} {v}",
        "{p}'s {x} is really into {v} these days",
        "{p} can't stop talking about {v}",
        "{p} showed me the results of their {v}, impressive",
    )
    asked = (
        ("{p}, what do you do on weekends now?", "{v}, every saturday morning"),
        ("what's your {x} up to these days, {p}?", "{v}, she's surprisingly good"),
        ("{p} got a new {HOBBY} yet?", "{v}! a friend dragged me along"),
    )
    split = (
        ("I found a {HOBBY} that finally stuck", "{v} twice a week, my flat is full of it"),
        ("my {x} has a new {HOBBY}", "{v}, and the whole house smells of it"),
    )
    questions = (
        "what {HOBBY} did {p}'s {x} take up?",
        "what does {p}'s {x} do in their free time?",
        "what is {p}'s {x} into these days?",
        "which {HOBBY} has {p}'s {x} started?",
        "how does {p}'s {x} spend weekends now?",
        "what new activity is {p}'s {x} doing?",
    )
    near = ("{p}'s {x} wants a new {HOBBY}", "{p} asked me for {HOBBY} ideas", "{p}, still looking for a {HOBBY}?")

    def subject(self):
        return (self.r.choice(PEOPLE), self.r.choice(RELATIONS))

    def value(self, subject):
        return self.r.choice(HOBBIES)


class Purchase(Kind):
    name = "purchase"
    told = (
        "I {BOUGHT} a {v}!",
        "the {v} arrived today, so happy with it",
        "finally {BOUGHT} the {v}, no regrets",
        "broke the bank on a {v}",
        "test drove my {v} around the block",
        "a {v}, second hand but mint",
    )
    reported = (
        "{p} {BOUGHT} a {v}",
        "{p} showed off the new {v}",
        "{p} spent all their savings on a {v}",
        "did you know {p} has a {v} now?",
    )
    asked = (
        ("{p}, which {X} did you go for in the end?", "the {v}, couldn't resist"),
        ("{p} did you replace the old {X}?", "yep, got a {v} last week"),
        ("so {p}, new {X}?", "a {v}! come see it"),
    )
    split = (
        ("the old {X} finally died", "so now I have a {v}"),
        ("spent the weekend shopping for a new {X}", "ended up with a {v}"),
    )
    questions = (
        "what {X} did {p} buy?",
        "which {X} did {p} get?",
        "what kind of {X} does {p} have now?",
        "what was {p}'s new {X}?",
        "what did {p} purchase to replace the {X}?",
        "which {X} is {p}'s latest?",
    )
    near = ("{p} wants a new {X}", "{p} asked me about {X}s for an hour", "{p}, still shopping for a {X}?")

    def subject(self):
        return (self.r.choice(PEOPLE), self.r.choice(sorted(GOODS)))

    def value(self, subject):
        return self.r.choice(GOODS[subject[1]][1])

    def synonyms(self, subject):
        return GOODS[subject[1]][0]


class Injury(Kind):
    name = "injury"
    told = (
        "{HURT} my {v} at {x}, on the sofa for a week",
        "no {x} for me, the {v} is swollen",
        "the physio says my {v} needs a month",
        "fell badly at {x} yesterday, {v} is purple",
        "I'm limping, {x} and my {v} do not get along",
        "ice on the {v} again, thanks {x}",
    )
    reported = (
        "{p} {HURT} their {v} at {x}",
        "{p} is out, something with the {v} after {x}",
        "{p} came in with the {v} strapped up",
        "poor {p}, {x} wrecked the {v}",
    )
    asked = (
        ("{p} why are you limping?", "{x} last night, my {v} twisted"),
        ("{p}, what happened at {x}?", "landed wrong, the {v} is {HURT}"),
        ("how are you feeling {p}?", "sore, the {v} still hasn't healed"),
    )
    split = (
        ("went to {x} and regretted it", "can barely move my {v} today"),
        ("doctor's appointment this afternoon", "{v}, from {x}, nothing broken"),
    )
    questions = (
        "what did {p} {HURT} at {x}?",
        "how did {p} get {HURT} doing {x}?",
        "which body part did {p} hurt?",
        "what injury did {p} get from {x}?",
        "why is {p} not doing {x}?",
        "what's wrong with {p} after {x}?",
    )
    near = ("{p} is back at {x} this week", "{p} wants to try {x}", "{p}, you coming to {x}?")

    def subject(self):
        return (self.r.choice(PEOPLE), self.r.choice(SPORTS))

    def value(self, subject):
        return self.r.choice(BODY)


class Favourite(Kind):
    name = "favourite"
    told = (
        "just finished {v}, best {X} this year",
        "{v} is my favourite {X}, read it twice",
        "can't stop thinking about {v}",
        "everyone should try {v}",
        "stayed up until 3 with {v}",
        "{v} made me cry on the train",
    )
    reported = (
        "{p} {LOVES} {v}",
        "{p} lent me {v}, their favourite {X}",
        "{p} won't shut up about {v}",
        "{p} says {v} changed their life",
    )
    asked = (
        ("{p}, any {X} recommendations?", "{v}, trust me"),
        ("{p} what's the best {X} you know?", "{v}, easily"),
        ("what are you into right now {p}?", "{v}, on my second time through"),
    )
    split = (
        ("I need to tell you about a {X}", "{v}. that's it, go"),
        ("found my new favourite {X}", "{v}, it came out last year"),
    )
    questions = (
        "what {X} does {p} recommend?",
        "what is {p}'s favourite {X}?",
        "which {X} does {p} love?",
        "what {X} was {p} raving about?",
        "what {X} should I try according to {p}?",
        "which {X} did {p} lend out?",
    )
    near = ("{p} is looking for a new {X}", "{p} hated the last {X} I suggested", "{p}, finished that {X} yet?")

    def subject(self):
        return (self.r.choice(PEOPLE), self.r.choice(sorted(MEDIA)))

    def value(self, subject):
        return f"the {self.r.choice(TITLE_A)} {self.r.choice(TITLE_B)}"

    def synonyms(self, subject):
        return MEDIA[subject[1]]


class ProjectDate(Kind):
    name = "date"
    personal = False
    told = (
        "the {p} {X} is set for {v}",
        "{v} it is for the {p} {X}",
        "we moved the {p} {X} to {v}",
        "calendar invite sent: {p} {X}, {v}",
        "{p} goes out {v}, tell your teams",
        "locking {v} for {p}",
    )
    reported = (
        "{o} says the {p} {X} is {v}",
        "{o} booked {v} for {p}",
        "heard from {o}: {p} on {v}",
        "{o} confirmed {v} for the {p} {X}",
    )
    asked = (
        ("when is the {p} {X} again?", "{v}, unless something breaks"),
        ("did we pick a {DATE} for {p}?", "{v}, it's in the calendar"),
        ("{p} {X}, any news?", "{v}, final answer"),
    )
    split = (
        ("I talked to the {p} team", "they said {v}, no earlier"),
        ("the {p} {X} finally has a {DATE}", "{v}, put it in your calendars"),
    )
    questions = (
        "when is the {p} {X}?",
        "what {DATE} did we set for the {p} {X}?",
        "when does {p} go live?",
        "what's the {DATE} for {p}?",
        "when is {p} scheduled?",
        "has {p} got a {DATE} yet?",
    )
    near = ("the {p} {X} checklist is in the wiki", "who is coming to the {p} {X}?", "the {p} {X} went badly last time")

    def subject(self):
        return (self.r.choice(PROJECTS), self.r.choice(sorted(EVENTS)))

    def value(self, subject):
        r = self.r
        return r.choice(
            (f"{r.choice(MONTHS)} {r.randrange(1, 29)}", f"the {_ordinal(r.randrange(1, 29))} of {r.choice(MONTHS)}")
        )

    def synonyms(self, subject):
        return EVENTS[subject[1]]


class Owner(Kind):
    name = "owner"
    personal = False
    told = (
        "{v} is {IN_CHARGE} the {p} {x} from now on",
        "handing the {p} {x} to {v}",
        "{v} volunteered for the {p} {x}",
        "ask {v} about the {p} {x}, not me",
        "{v} takes over the {p} {x} next week",
        "the {p} {x} is {v}'s now",
    )
    reported = (
        "{o} says {v} is {IN_CHARGE} the {p} {x}",
        "{o} gave the {p} {x} to {v}",
        "{o} told me {v} has the {p} {x}",
        "{o}: {v} owns {p}'s {x}",
    )
    asked = (
        ("who has the {p} {x} now?", "{v}, since last week"),
        ("is anyone {IN_CHARGE} the {p} {x}?", "{v} said yes"),
        ("the {p} {x} needs a person", "{v} will do it"),
    )
    split = (("we sorted out the {p} {x}", "{v} has it"), ("found someone for the {p} {x}", "{v}, who else"))
    questions = (
        "who is {IN_CHARGE} the {p} {x}?",
        "who owns the {p} {x}?",
        "who should I ask about the {p} {x}?",
        "who took over the {p} {x}?",
        "who is {IN_CHARGE} {p}'s {x}?",
        "who got the {p} {x}?",
    )
    near = ("the {p} {x} is a mess", "nobody wants the {p} {x}", "the {p} {x} needs attention")

    def subject(self):
        return (self.r.choice(PROJECTS), self.r.choice(AREAS))

    def value(self, subject):
        return self.r.choice(PEOPLE)


class Decision(Kind):
    name = "decision"
    personal = False
    told = (
        "we {CHOSE} {v} for {p} {x}",
        "final call: {v} for {x} on {p}",
        "{v} won the {p} {x} bake-off",
        "{p} {x} will run on {v}",
        "after the trial, {v} for {p}",
        "migrating {p}'s {x} to {v} next sprint",
    )
    reported = (
        "{o} {CHOSE} {v} for {p} {x}",
        "{o} says {p} uses {v} for {x} now",
        "{o} signed off on {v} for {p}",
        "{o} wants {v} for the {p} {x}",
    )
    asked = (
        ("what are we using for {p} {x}?", "{v}, it's decided"),
        ("did {p} pick a {x} tool?", "{v}, finally"),
        ("{p} {x}: what's the plan?", "{v}, rollout next week"),
    )
    split = (("the {p} {x} debate is over", "{v} it is"), ("we settled the {p} {x} question", "{v}, unanimous"))
    questions = (
        "what did we choose for {p} {x}?",
        "which tool does {p} use for {x}?",
        "what did the team pick for {p} {x}?",
        "what runs {p}'s {x}?",
        "which option won for {p} {x}?",
        "what are we using for {x} on {p}?",
    )
    near = ("we still need to decide {p} {x}", "the {p} {x} setup is flaky", "{p} {x} is on the agenda")

    def subject(self):
        return (self.r.choice(PROJECTS), self.r.choice(PURPOSES))

    def value(self, subject):
        return self.r.choice(TOOLS)


class Whereabouts(Kind):
    name = "where"
    told = (
        "I {PUT} my {x} in {v}",
        "my {x} is in {v} now",
        "if anyone needs my {x}: {v}",
        "moved my {x} to {v}",
        "{x} is back in {v}",
        "found my {x}, it was in {v} all along",
    )
    reported = (
        "{p}'s {x} is in {v}",
        "{p} {PUT} the {x} in {v}",
        "{o} saw {p}'s {x} in {v}",
        "{p} said the {x} lives in {v}",
    )
    asked = (
        ("{p}, where's your {x}?", "{v}, help yourself"),
        ("{p} do you still have the {x}?", "yes, in {v}"),
        ("anyone seen {p}'s {x}?", "{v}, I put it there"),
    )
    split = (("I tidied up my {x} and things", "all in {v} now"), ("my {x} has a new home", "{v}, so I stop losing it"))
    questions = (
        "where is {p}'s {x}?",
        "where did {p} put the {x}?",
        "where does {p} keep the {x}?",
        "I need {p}'s {x}, where is it?",
        "where would {p}'s {x} be?",
        "where was {p}'s {x} left?",
    )
    near = ("has anyone seen {p}'s {x}?", "{p} lost the {x} again", "{p} needs a new {x}")

    def subject(self):
        return (self.r.choice(PEOPLE), self.r.choice(ITEMS))

    def value(self, subject):
        return self.r.choice(PLACES)


KINDS = (Trip, Pet, Job, Hobby, Purchase, Injury, Favourite, ProjectDate, Owner, Decision, Whereabouts)
_SLOT = re.compile(r"\{([A-Za-z_]+)\}")
SPLITS = ("all", "tune", "held-out")


def _half(items: tuple, split: str) -> tuple:
    """The templates of a split: the even ones to tune with, the odd ones held out."""
    if split == "all":
        return items
    return items[0 if split == "tune" else 1 :: 2]


def _chatter(r: random.Random) -> tuple[str, str]:
    """A turn about nothing asked: the same words as the facts, in other senses."""
    p, o, q = r.choice(PEOPLE), r.choice(PEOPLE), r.choice(PROJECTS)
    s, x = r.choice(SERVICES), r.choice(("trip", "job", "dog", "bike", "book", "car", "hobby", "holiday", "show"))
    return r.choice(
        (
            ("morning all", "Good morning!"),
            ("anyone up for lunch?", "The usual place?"),
            ("thanks!", "You're welcome."),
            (f"{p} did you see the game last night?", "I'll stay out of this one."),
            (f"remind me to call {o} tomorrow", "Will do."),
            ("what's the weather like later?", "Rain after four."),
            (f"the {q} {s} is slow again", f"I can look at the {s} metrics."),
            (f"how do I restart {s}?", f"`systemctl restart {s}`."),
            (f"is the {q} build green?", "Yes, all checks passed."),
            (f"{p} is working from home today", "OK."),
            (f"my {x} story for today: nothing happened", "Ha."),
            (f"anyone been to {r.choice(CITIES)}?", "Not me."),
            ("what should I watch tonight?", "Something short?"),
            (f"{p}, are you at the standup?", "They said five minutes."),
            ("I'm so tired of this week", "Almost friday."),
            (f"{p} and {o} are pairing on {q}", "Good luck to them."),
            (f"can you summarise the {q} thread?", f"{o} wants to wait; {p} wants to ship."),
            ("brb coffee", "☕"),
            (f"{p} sent the {x} photos to the wrong channel again", "Happens."),
            ("who's on call this weekend?", f"{o}, I think."),
            (f"the {q} {s} logs are noisy", "I'll lower the log level."),
            (f"happy birthday {p}!", "🎂"),
            (f"talking about {x}s again, are we", "Always."),
            (f"did {p} ever reply about {q}?", "Not yet."),
        )
    )


class _Filler:
    def __init__(self, r: random.Random) -> None:
        self.r = r

    def fill(self, template: str, subject: tuple, kind: Kind, value: str, other: str) -> str:
        r = self.r
        x = subject[1] if len(subject) > 1 else ""
        xs = kind.synonyms(subject)

        def slot(m: re.Match) -> str:
            name = m.group(1)
            if name == "p":
                return str(subject[0])
            if name == "x":
                return str(x)
            if name == "X":
                return r.choice(xs)
            if name == "v":
                return value
            if name == "o":
                return other
            return r.choice(SYN[name])

        if not x:  # the person themself, not a relative
            for mine, plain in (("{p}'s {x}'s", "{p}'s"), ("{p}'s {x}", "{p}"), ("my {x}", "I"), ("your {x}", "you")):
                template = template.replace(mine, plain)
        text = _SLOT.sub(slot, template)
        return re.sub(r"\s+", " ", text.replace("'s 's", "'s").replace(" 's", "'s")).strip()


def generate(turns: int, seed: int = 19, split: str = "held-out") -> Corpus:
    """A history of `turns` turns and its questions (every paraphrase of at most 300 facts, from every age)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}")
    r = random.Random(seed)
    kinds = [k(r) for k in KINDS]
    filler = _Filler(r)
    sessions = _sessions(turns, r)  # the session of each slot
    slots: list[Turn | None] = [None] * turns
    facts: list[tuple] = []  # (kind, subject, value, [(slot, speaker)] of the turns that state the value)
    used: set[tuple] = set()
    wanted = max(150, turns // 12)
    tries = 0

    def free(slot: int, n: int = 1) -> bool:
        return (
            slot + n <= turns
            and all(slots[s] is None for s in range(slot, slot + n))
            and sessions[slot] == sessions[slot + n - 1]
        )

    while len(facts) < wanted and tries < wanted * 30:
        tries += 1
        kind = r.choice(kinds)
        subject = kind.subject()
        key = (kind.name, *subject)
        if key in used:
            continue
        value = kind.value(subject)
        told: list[tuple[int, str]] = []
        ways: set[str] = set()
        for _mention in range(1 + (r.random() < 0.35)):  # said once, sometimes again later
            way = r.choices(("told", "reported", "asked", "split"), (4, 3, 2, 1))[0]
            if not kind.personal and way == "told":
                way = "reported" if r.random() < 0.3 else "told"
            pairs = way in ("asked", "split")
            ways.add("two turns" if pairs else "one turn")
            for _ in range(20):
                slot = r.randrange(turns)
                if free(slot, 2 if pairs else 1) and (not told or slot > told[-1][0]):
                    break
            else:
                continue
            person = subject[0] if kind.personal else r.choice(PEOPLE)
            other = r.choice([p for p in PEOPLE if p != subject[0]])
            if way == "told":
                text = filler.fill(r.choice(_half(kind.told, split)), subject, kind, value, other)
                slots[slot] = Turn(person, text, _reply(r, value))
                told.append((slot, person))
            elif way == "reported":
                text = filler.fill(r.choice(_half(kind.reported, split)), subject, kind, value, other)
                slots[slot] = Turn(other, text, _reply(r, value))
                told.append((slot, other))
            else:
                first, second = r.choice(_half(kind.asked if way == "asked" else kind.split, split))
                by = other if way == "asked" else person
                slots[slot] = Turn(by, filler.fill(first, subject, kind, value, other), r.choice(ACKS))
                slots[slot + 1] = Turn(person, filler.fill(second, subject, kind, value, other), _reply(r, value))
                told.append((slot + 1, person))
        if told:
            used.add(key)
            facts.append((kind, subject, value, told, "one turn" if "one turn" in ways else "two turns"))
    misses: dict[int, int] = {}
    for slot in range(turns):
        if slots[slot] is None:
            pick = r.randrange(len(facts)) if facts and r.random() < 0.25 else None
            speaker = r.choice(PEOPLE)
            if pick is not None and misses.get(pick, 0) < 3:
                misses[pick] = misses.get(pick, 0) + 1
                kind, subject, value, _told, _how = facts[pick]
                near = filler.fill(r.choice(kind.near), subject, kind, "", r.choice(PEOPLE))
                slots[slot] = Turn(speaker, near, r.choice(ACKS))
            else:
                slots[slot] = Turn(speaker, *_chatter(r))
    history = [t for t in slots if t is not None]
    _date(history, sessions, r)
    corpus = Corpus(history)
    from .corpus import _spread

    chosen = _spread([(kind, subject, told, value, how) for kind, subject, value, told, how in facts], turns, r)
    for kind, subject, told, value, how in chosen:
        newest = max(slot for slot, _s in told)
        answers = [(history[slot].session, history[slot].n) for slot, _s in told]
        for template in _half(kind.questions, split):
            text = filler.fill(template, subject, kind, value, "")
            corpus.questions.append(
                Question(text, answers, newest / max(1, turns - 1), kind.name, (kind.name, *subject), value, how)
            )
    return corpus


def _reply(r: random.Random, value: str) -> str:
    """The agent's reply: mostly an acknowledgement, sometimes the value said back."""
    if r.random() < 0.2:
        return r.choice((f"{value}, noted.", f"Oh, {value}!", f"{value.capitalize()}, nice."))
    return r.choice(ACKS)


def _sessions(turns: int, r: random.Random) -> list[int]:
    """The session of each turn: sessions of 4 to 40 turns, in order."""
    out: list[int] = []
    session = 0
    while len(out) < turns:
        session += 1
        out += [session] * r.randrange(4, 41)
    return out[:turns]


def _date(history: list[Turn], sessions: list[int], r: random.Random) -> None:
    """Session ids, turn numbers and timestamps: a session every day or three, turns a few minutes apart."""
    day, last, n = 0, 0, 0
    for turn, session in zip(history, sessions, strict=True):
        if session != last:
            last, n = session, 0
            day += r.choice((1, 1, 2, 3))
        n += 1
        month, mday = divmod(day, 28)
        year, month = divmod(month, 12)
        turn.session, turn.n = f"d{session:06d}", n
        turn.ts = f"{2023 + year}-{month + 1:02d}-{mday + 1:02d}T{9 + n // 12 % 10:02d}:{(n * 5) % 60:02d}:00Z"
