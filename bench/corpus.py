"""A generated conversational history with questions and the turns that answer them.

Deterministic from a seed. An agent's long history as its logs would hold it:
forty speakers, a few thousand project, service and household subjects, and
facts about them (dates, owners, backup targets, settings, names, preferences,
decisions, where things are) stated, restated, corrected and stated in the
reply rather than the question, inside long pasted notes as well as short
lines. Most turns are filler over the same vocabulary: near misses that name a
subject without its fact, and people asking what the benchmark asks. Questions
are natural and paraphrased, in the forms people use (other inflections, the
speaker's name, common words), with every turn that states the fact's current
value as an answer. Facts are planted at every age, evenly.

Not a public benchmark and built from none: the words and templates are this
file's own.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


def _words(text: str) -> list[str]:
    return text.split()


PEOPLE = _words(
    "kyle maria dev priya tom aisha ben chen dana eli fatima greg hana ivan jo kofi lena marco nina omar "
    "paula quinn rosa sam tariq uma vik wen xavi yuki zoe alex bea carlos dmitri emma felix gita hugo isla"
)
PROJECTS = sorted(
    set(
        _words(
            "gecko heron otter lynx marmot ibis tapir okapi serval caracal dingo wombat koala quokka numbat bilby puffin "
            "badger ferret falcon kestrel osprey pelican walrus narwhal beluga orca manatee iguana cobra viper mamba gazelle "
            "impala kudu eland oryx bison yak llama alpaca vicuna panda lemur loris gibbon macaque mandrill baboon jackal "
            "coyote beaver shrew hedgehog porcupine armadillo sloth anteater aardvark meerkat mongoose civet genet ocelot "
            "margay cheetah jaguar puma cougar leopard raven magpie finch robin wren swallow egret stork crane flamingo "
            "albatross petrel gannet cormorant tern plover curlew snipe dunlin avocet lapwing bittern moorhen coot grebe "
            "loon eider teal wigeon pintail scaup merganser goshawk buzzard harrier condor vulture kakapo kea kiwi emu "
            "cassowary rhea ostrich tortoise newt axolotl salamander toad skink gharial caiman marlin tuna salmon trout "
            "pike perch carp squid octopus cuttlefish nautilus urchin starfish krill shrimp lobster barnacle"
        )
    )
)
# noun, verb, gerund, past participle
EVENTS = (
    ("migration", "migrate", "migrating", "migrated"),
    ("launch", "launch", "launching", "launched"),
    ("upgrade", "upgrade", "upgrading", "upgraded"),
    ("audit", "audit", "auditing", "audited"),
    ("rollout", "roll out", "rolling out", "rolled out"),
    ("review", "review", "reviewing", "reviewed"),
    ("release", "release", "releasing", "released"),
    ("deployment", "deploy", "deploying", "deployed"),
    ("demo", "demo", "demoing", "demoed"),
    ("cutover", "cut over", "cutting over", "cut over"),
    ("handover", "hand over", "handing over", "handed over"),
    ("decommissioning", "decommission", "decommissioning", "decommissioned"),
    ("load test", "load test", "load testing", "load tested"),
    ("renewal", "renew", "renewing", "renewed"),
    ("rebuild", "rebuild", "rebuilding", "rebuilt"),
    ("shutdown", "shut down", "shutting down", "shut down"),
)
THINGS = (
    "database",
    "wiki",
    "photos",
    "mail",
    "home directories",
    "git repos",
    "dashboards",
    "logs",
    "media library",
    "config files",
    "vm images",
    "chat history",
)
SERVICES = _words(
    "redis postgres nginx grafana prometheus kafka elasticsearch jenkins gitlab vault minio rabbitmq "
    "memcached haproxy loki mysql mongodb traefik consul etcd"
)
# setting, unit, how a person asks for it
SETTINGS = (
    ("retention", "days", "how long does the {P} {S} keep its data?"),
    ("timeout", "seconds", "how long before requests to the {P} {S} time out?"),
    ("max connections", "", "how many connections can the {P} {S} take?"),
    ("replica count", "", "how many replicas does the {P} {S} run?"),
    ("memory limit", "gb", "how much memory is the {P} {S} allowed?"),
    ("worker count", "", "how many workers does the {P} {S} have?"),
    ("cache size", "mb", "how big is the cache on the {P} {S}?"),
)
RELATIONS = ("dog", "cat", "son", "daughter", "parrot", "horse", "tortoise", "rabbit")
NAMES = _words(
    "biscuit pepper luna milo nova juniper olive pickles mochi ziggy clementine otis hazel tofu waffles "
    "rusty poppy bramble sprout noodle maple ember fig basil cosmo pixel"
)
TOPICS = (
    ("coffee", "oat flat white|black americano|double espresso|cold brew|decaf latte|cortado"),
    ("editor", "vim|emacs|vs code|helix|sublime text|nano"),
    ("meeting time", "mornings before ten|right after lunch|late afternoons|tuesdays only"),
    ("units", "metric units|imperial units"),
    ("lunch", "the thai place|sushi|salads from the deli|whatever is fastest"),
    ("shell", "zsh|fish|bash|nushell"),
    ("notification channel", "email|a mattermost dm|sms|a phone call"),
    ("programming language", "python|go|rust|typescript|elixir"),
    ("keyboard layout", "dvorak|colemak|qwerty"),
    ("music for focus", "lo-fi beats|classical piano|silence|jazz"),
)
# purpose, how a person asks about it
PURPOSES = (
    ("log shipping", "shipping logs"),
    ("secrets management", "managing secrets"),
    ("monitoring", "monitoring"),
    ("ci pipeline", "running ci"),
    ("alerting", "alerting"),
    ("config management", "managing config"),
    ("dns hosting", "hosting dns"),
    ("ticketing", "tracking tickets"),
    ("load balancing", "balancing load"),
    ("object storage", "storing objects"),
)
TOOLS = _words(
    "vector fluent-bit loki vault sops prometheus zabbix gitlab-ci jenkins drone alertmanager ansible salt "
    "terraform powerdns cloudflare jira redmine haproxy envoy minio ceph"
)
ITEMS = (
    "spare keys",
    "laptop charger",
    "yubikey",
    "router manual",
    "hdmi adapter",
    "spare ssd",
    "label printer",
    "rack key",
    "installer usb stick",
    "ethernet cables",
    "badge",
    "passport",
    "camera",
    "headphones",
    "tripod",
)
PLACES = (
    "the top drawer of the blue cabinet",
    "the box under the desk",
    "the server closet",
    "the kitchen shelf",
    "the safe",
    "the glovebox of the van",
    "the shoebox in the hallway",
    "the second shelf in the garage",
    "the grey backpack",
    "the filing cabinet by the window",
)
REGIONS = ("eu-west-1", "us-east-2", "ap-south-1", "eu-central-1", "us-west-1")
MONTHS = _words("january february march april may june july august september october november december")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday")


@dataclass
class Turn:
    speaker: str
    text: str
    reply: str
    session: str = ""
    n: int = 0
    ts: str = ""


@dataclass
class Question:
    text: str
    answers: list[tuple[str, int]]  # (session, turn) of every turn stating the current value
    age: float  # where the newest answer sits in the history: 0.0 the oldest turn, 1.0 the newest
    kind: str
    subject: tuple = ()  # what the fact is about (the same subject in another corpus is the same fact)
    value: str = ""  # the fact's current value, as the answer turns state it
    how: str = ""  # how the answer was said (bench/dialogue.py): "one turn", or "two turns" when every answer leans on the turn before


@dataclass
class Corpus:
    turns: list[Turn]
    questions: list[Question] = field(default_factory=list)


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 < 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


class _Writer:
    """Fills the templates of one fact kind; `r` is the corpus's random source."""

    def __init__(self, r: random.Random) -> None:
        self.r = r

    def person(self) -> str:
        return self.r.choice(PEOPLE)

    def date(self) -> str:
        r = self.r
        form = r.randrange(3)
        if form == 0:
            return f"{r.choice(MONTHS)} {r.randrange(1, 29)}"
        if form == 1:
            return f"the {_ordinal(r.randrange(1, 29))} of {r.choice(MONTHS)}"
        return f"{r.choice(WEEKDAYS)} the {_ordinal(r.randrange(1, 29))}"

    def long_note(self, inner: str | None = None) -> str:
        """Pasted meeting notes, a thousand characters or more, the fact (if any) somewhere inside."""
        r = self.r
        lines = []
        for _ in range(r.randrange(8, 14)):
            p, (e, _v, g, _past), s = r.choice(PROJECTS), r.choice(EVENTS), r.choice(SERVICES)
            lines.append(
                r.choice(
                    (
                        f"- {self.person()} gave an update on the {p} {e}; no date yet, more next week.",
                        f"- the {p} {s} dashboards were reviewed; nothing unusual apart from a slow disk.",
                        f"- {self.person()} raised the question of {g} {p} before the holidays.",
                        f"- action: {self.person()} to write up the {p} {s} runbook and share it in the wiki.",
                        f"- discussion about the backups of the {p} {r.choice(THINGS)}; they take too long.",
                        f"- {self.person()} and {self.person()} will pair on the {p} {s} alerts.",
                    )
                )
            )
        if inner is not None:
            lines.insert(r.randrange(2, len(lines) - 1), f"- {inner}.")
        return "notes from today's sync, please keep them:\n" + "\n".join(lines)


# --- the fact kinds ---------------------------------------------------------------------------
# Each kind makes a subject (unique in a corpus), values, and the texts: a statement, a
# correction, a restatement, a statement that leans on the turn before it (the subject
# only there), questions and near misses. `S` in a question is a speaker of an answer turn.


class Kind:
    name = ""
    personal = False  # the subject is a person, who often says the fact themselves

    def __init__(self, w: _Writer) -> None:
        self.w, self.r = w, w.r

    def pick(self, *options):
        return self.r.choice(options)

    def subject(self) -> tuple:
        raise NotImplementedError

    def value(self, subject: tuple) -> str:
        raise NotImplementedError

    def stated(self, subject: tuple, value: str, own: bool) -> tuple[str, str]:
        """`own`: the speaker is the subject person (personal kinds)."""
        raise NotImplementedError

    def corrected(self, subject: tuple, value: str, own: bool) -> tuple[str, str]:
        raise NotImplementedError

    def restated(self, subject: tuple, value: str, own: bool) -> tuple[str, str]:
        return self.stated(subject, value, own)

    def lead_in(self, subject: tuple) -> tuple[str, str] | None:
        """The turn before a statement that names its subject only there, or None."""
        return None

    def after_lead_in(self, value: str) -> tuple[str, str]:
        raise NotImplementedError

    def questions(self, subject: tuple, speaker: str) -> list[str]:
        raise NotImplementedError

    def near_miss(self, subject: tuple) -> tuple[str, str]:
        raise NotImplementedError

    def said_around(self, turn: tuple[str, str]) -> tuple[str, str]:
        """A near miss as different people put it: the same question is rarely typed twice alike."""
        text, reply = turn
        r = self.r
        before = r.choice(
            ("", "", "", "quick one: ", "sorry to bother, ", f"{self.w.person()} wants to know: ", "hey, ")
        )
        after = r.choice(("", "", "", " today", " this week", " again", ", any idea", " before friday"))
        asked = text.endswith("?")
        return before + text.removesuffix("?") + after + ("?" if asked else ""), reply


class EventDate(Kind):
    name = "date"

    def subject(self):
        return (self.r.choice(PROJECTS), self.r.choice(EVENTS))

    def value(self, subject):
        return self.w.date()

    def stated(self, subject, d, own):
        p, (e, v, g, past) = subject
        return self.pick(
            (f"the {p} {e} is set for {d}", f"Noted: the {p} {e} is on {d}."),
            (f"heads up, we're {g} {p} on {d}", f"Got it, {d}."),
            (f"we agreed to {v} {p} on {d}", f"Added to the calendar: {p}, {d}."),
            (f"{d} works for everyone, so that's when we {v} {p}", "Great, it's in the calendar."),
            (f"the team picked {d} for {g} {p}", f"Noted, {d}."),
            (f"{p} gets {past} on {d}, tell the others", f"I'll let everyone know: {d}."),
            (f"can you check when the {p} {e} is?", f"The team calendar has the {p} {e} on {d}."),
            (f"did we ever fix a date for {g} {p}?", f"Yes, {d}: you scheduled it last week."),
        )

    def corrected(self, subject, d, own):
        p, (e, _v, g, _past) = subject
        return self.pick(
            (f"change of plans: the {p} {e} moves to {d}", f"Updated: {d}."),
            (f"we had to push the {p} {e} back to {d}", f"Moved it to {d}."),
            (f"{g} {p} is now happening on {d} instead", "Calendar updated."),
            (f"the {p} {e} slipped, new date is {d}", f"Changed to {d}."),
            (f"{self.w.person()} rescheduled the {p} {e} for {d}", f"Rescheduled: {d}."),
        )

    def restated(self, subject, d, own):
        p, (e, _v, _g, _past) = subject
        return self.pick(
            (f"reminder that the {p} {e} is {d}", "Thanks for the reminder."),
            (f"still on for {d} with {p}?", f"Yes, the {p} {e} is still {d}."),
        )

    def lead_in(self, subject):
        p, (e, _v, _g, _past) = subject
        return (f"I talked to {self.w.person()} about the {p} {e}", "What did they say?")

    def after_lead_in(self, d):
        return self.pick((f"{d}, if nothing breaks before then", f"OK, {d}."), (f"they said {d}", f"Noted, {d}."))

    def questions(self, subject, speaker):
        p, (e, v, g, past) = subject
        return [
            f"when is the {p} {e}?",
            f"what date did we settle on for the {p} {e}?",
            f"when are we {g} {p}?",
            f"when does {p} get {past}?",
            f"when did {speaker} say we'd {v} {p}?",
            f"what's the date for {p}'s {e}?",
            f"has the {p} {e} been scheduled?",
            f"do we have a date to {v} {p}?",
            f"when did we say {p} would be {past}?",
        ]

    def near_miss(self, subject):
        p, (e, _v, g, _past) = subject
        return self.pick(
            (f"any news on the {p} {e}?", f"Nothing new on the {p} {e} yet."),
            (f"who's joining the {p} {e} call?", f"Not sure yet, ask {self.w.person()}."),
            (f"{self.w.person()} asked about {g} {p} again", "I'll follow up."),
            (f"when is the {p} {e}?", "I don't have a date for it yet."),
            (f"the {p} {e} went badly last time, let's prepare better", "Agreed, I'll draft a checklist."),
            (f"write the announcement for the {p} {e}", f"Draft: the {p} {e} is coming soon; details to follow."),
        )


class Owner(Kind):
    name = "owner"

    def subject(self):
        return (self.r.choice(PROJECTS), self.r.choice(EVENTS), "owner")

    def value(self, subject):
        return self.w.person()

    def stated(self, subject, o, own):
        p, (e, v, g, _past), _ = subject
        return self.pick(
            (f"{o} is taking over the {p} {e}", f"Noted, {o} owns it."),
            (f"I'm handing the {p} {e} to {o}", f"OK, {o} it is."),
            (f"from now on {o} runs the {p} {e}", f"Got it, questions about the {p} {e} go to {o}."),
            (f"{o} volunteered to {v} {p}", "Nice, one less thing for you."),
            (f"{o} will be {g} {p}, not me", f"Understood, {o}."),
            (f"who was the {p} {e} assigned to again?", f"{o}; you assigned it on monday."),
        )

    def corrected(self, subject, o, own):
        p, (e, _v, _g, _past), _ = subject
        return self.pick(
            (f"actually {o} is in charge of the {p} {e} now", f"Updated: {o}."),
            (f"{o} took over the {p} {e} last week", "Noted."),
        )

    def lead_in(self, subject):
        p, (e, _v, _g, _past), _ = subject
        return (f"we need someone for the {p} {e}", "Any volunteers?")

    def after_lead_in(self, o):
        return self.pick((f"{o} will take it", f"Great, {o} it is."), (f"{o} said yes", f"Noted: {o}."))

    def questions(self, subject, speaker):
        p, (e, _v, g, _past), _ = subject
        return [
            f"who owns the {p} {e}?",
            f"who is in charge of {g} {p}?",
            f"who's responsible for the {p} {e}?",
            f"who did {speaker} hand the {p} {e} to?",
            f"who should I talk to about {g} {p}?",
            f"who's taking care of the {p} {e}?",
            f"who took over {g} {p}?",
            f"who got the {p} {e} in the end?",
        ]

    def near_miss(self, subject):
        p, (e, _v, _g, _past), _ = subject
        return self.pick(
            (f"the {p} {e} checklist is in the wiki", "Thanks, I'll read it before the meeting."),
            (f"who's going to own the {p} {e}?", "Nobody has picked it up yet."),
            (f"the {p} {e} needs an owner", "I'll raise it at the standup."),
        )


class BackupTarget(Kind):
    name = "backup"

    def subject(self):
        return (self.r.choice(PROJECTS), self.r.choice(THINGS))

    def value(self, subject):
        r = self.r
        return r.choice(
            (
                f"the {r.choice(PROJECTS)} nas",
                f"an s3 bucket in {r.choice(REGIONS)}",
                "backblaze b2",
                f"the offsite box at {self.w.person()}'s house",
                "the tape library",
                "the old dell server in the basement",
                "the hetzner storage box",
            )
        )

    def stated(self, subject, loc, own):
        p, t = subject
        return self.pick(
            (f"the {p} {t} backups go to {loc} now", f"OK, {loc}."),
            (f"we back up the {p} {t} to {loc} every night", "Noted."),
            (f"set up restic so the {p} {t} is backed up to {loc}", f"Done: restic sends the {p} {t} to {loc} at 2am."),
            (f"nightly backup for the {p} {t}: {loc}", "Configured."),
            (f"I pointed the {p} {t} backup job at {loc}", "Checked it, the first snapshot succeeded."),
            (f"where does the {p} {t} backup end up?", f"In {loc}; the job runs nightly."),
        )

    def corrected(self, subject, loc, own):
        p, t = subject
        return self.pick(
            (f"we moved the {p} {t} backups to {loc}", f"Done, {loc} from tonight."),
            (f"switching the {p} {t} backup target to {loc}", "Switched."),
        )

    def lead_in(self, subject):
        p, t = subject
        return (f"the {p} {t} needs a backup target", "Where should it go?")

    def after_lead_in(self, loc):
        return self.pick((f"use {loc}", f"Set to {loc}."), (f"it should go to {loc}", f"OK, {loc}."))

    def questions(self, subject, speaker):
        p, t = subject
        return [
            f"where do the {p} {t} backups go?",
            f"where are we backing up the {p} {t}?",
            f"where's the {p} {t} backed up to?",
            f"what did {speaker} say about the {p} {t} backups?",
            f"if the {p} {t} dies, where do I restore it from?",
            f"which storage holds the {p} {t} copies?",
            f"where did we point the {p} {t} backup?",
        ]

    def near_miss(self, subject):
        p, t = subject
        return self.pick(
            (f"the {p} {t} backup failed again last night", "I restarted the job; it finished at 3am."),
            (f"I think the {p} {t} backups are too slow", "They take about two hours; compression would help."),
            (f"how big are the {p} {t} backups?", "About 40 GB a snapshot."),
            (f"where do the {p} {t} backups go?", "I'm not sure; check with whoever set it up."),
        )


class Setting(Kind):
    name = "setting"

    def subject(self):
        return (self.r.choice(PROJECTS), self.r.choice(SERVICES), self.r.choice(SETTINGS))

    def value(self, subject):
        unit = subject[2][1]
        return f"{self.r.choice((2, 3, 4, 5, 8, 10, 12, 16, 20, 30, 45, 60, 90, 100, 128, 200, 256, 500, 1000))} {unit}".strip()

    def stated(self, subject, amount, own):
        p, s, (name, _unit, _ask) = subject
        return self.pick(
            (f"set the {p} {s} {name} to {amount}", f"Done, {amount}."),
            (f"I bumped the {p} {s} {name} to {amount}", f"Confirmed: {amount} is live."),
            (f"the {p} {s} {name} should be {amount}", f"Changed it to {amount}."),
            (f"please make the {name} on {p}'s {s} {amount}", "Applied."),
            (f"what's the {name} on the {p} {s} at the moment?", f"It's {amount}, set in the config repo."),
        )

    def corrected(self, subject, amount, own):
        p, s, (name, _unit, _ask) = subject
        return self.pick(
            (f"that was too much, change the {p} {s} {name} to {amount}", f"Reverted to {amount}."),
            (f"we lowered the {p} {s} {name} to {amount} after the incident", "Noted."),
        )

    def lead_in(self, subject):
        p, s, (name, _unit, _ask) = subject
        return (f"the {p} {s} {name} is wrong", "What should it be?")

    def after_lead_in(self, amount):
        return (f"{amount} is what the vendor suggests", f"I'll set {amount}.")

    def questions(self, subject, speaker):
        p, s, (name, _unit, ask) = subject
        return [
            f"what is the {name} on the {p} {s}?",
            f"what did we set the {p} {s} {name} to?",
            ask.format(P=p, S=s),
            f"what value did {speaker} pick for the {p} {s} {name}?",
            f"what's the current {p} {s} {name}?",
            f"did anyone change the {name} of {p}'s {s}? to what?",
        ]

    def near_miss(self, subject):
        p, s, (name, _unit, _ask) = subject
        return self.pick(
            (
                f"can you check why the {p} {s} alerts fired?",
                f"The disk on the {p} {s} host filled up; I cleaned old logs.",
            ),
            (f"did the {p} {s} restart cleanly?", "Yes, it came back in about a minute."),
            (f"should we change the {p} {s} {name}?", "Maybe; let's look at the metrics first."),
        )


class PetName(Kind):
    name = "name"
    personal = True

    def subject(self):
        return (self.w.person(), self.r.choice(RELATIONS))

    def value(self, subject):
        return self.r.choice(NAMES)

    def stated(self, subject, n, own):
        who, rel = subject
        if own:
            return self.pick(
                (f"my {rel} is called {n}", f"What a lovely name, {n}!"),
                (f"I named my new {rel} {n}", f"Congratulations! {n} is a great name."),
                (f"{n} kept me up all night, silly {rel}", "Oh no, I hope you get some sleep."),
                (f"we finally picked a name for the {rel}: {n}", f"{n}, lovely."),
            )
        return self.pick(
            (f"{who}'s {rel} is named {n}", f"Noted, {n}."), (f"met {who}'s {rel} today, {n} is adorable", "Cute!")
        )

    def corrected(self, subject, n, own):
        who, rel = subject
        if own:
            return (f"we changed the {rel}'s name to {n}", "Noted.")
        return (f"{who} renamed the {rel}, it's {n} now", "Got it.")

    def questions(self, subject, speaker):
        who, rel = subject
        return [
            f"what is {who}'s {rel} called?",
            f"what's the name of {who}'s {rel}?",
            f"what did {who} name their {rel}?",
            f"does {who} have a {rel}? what's it called?",
            f"what do they call {who}'s {rel}?",
            f"remind me of {who}'s {rel}'s name",
        ]

    def near_miss(self, subject):
        who, rel = subject
        return self.pick(
            (f"{who}'s {rel} was in the video call again", "Always a highlight."),
            (f"{who} is looking for a {rel} sitter", "I can ask around."),
        )


class Preference(Kind):
    name = "preference"
    personal = True

    def subject(self):
        return (self.w.person(), self.r.choice(TOPICS))

    def value(self, subject):
        return self.r.choice(subject[1][1].split("|"))

    def stated(self, subject, v, own):
        who, (topic, _values) = subject
        if own:
            return self.pick(
                (f"I prefer {v} for {topic}", f"Noted: {v}."),
                (f"for {topic}, always {v} for me please", "Will remember."),
                (f"just so you know, my go-to {topic} is {v}", "Noted."),
            )
        return self.pick(
            (f"{who} said they prefer {v} for {topic}", "Noted."),
            (f"{who} only likes {v}, don't get anything else for {topic}", "Understood."),
        )

    def corrected(self, subject, v, own):
        who, (topic, _values) = subject
        if own:
            return (f"I've changed my mind, {v} for {topic} from now on", "Updated your preference.")
        return (f"{who} switched: it's {v} for {topic} now", "Updated.")

    def questions(self, subject, speaker):
        who, (topic, _values) = subject
        return [
            f"what {topic} does {who} prefer?",
            f"what's {who}'s preferred {topic}?",
            f"which {topic} does {who} like?",
            f"what should I get {who} for {topic}?",
            f"what does {who} usually go for when it comes to {topic}?",
        ]

    def near_miss(self, subject):
        who, (topic, _values) = subject
        return self.pick(
            (f"we argued about {topic} with {who} again", "Everyone has opinions about that."),
            (f"{who} complained about the {topic} at the offsite", "Noted for next time."),
        )


class Decision(Kind):
    name = "decision"

    def subject(self):
        return (self.r.choice(PROJECTS), self.r.choice(PURPOSES))

    def value(self, subject):
        return self.r.choice(TOOLS)

    def stated(self, subject, tool, own):
        p, (purpose, _ask) = subject
        return self.pick(
            (f"we decided to use {tool} for the {p} {purpose}", f"Recorded: {tool}."),
            (f"final call: {tool} for {purpose} on {p}", "Recorded the decision."),
            (f"let's go with {tool} for {p} {purpose}", "Agreed, I'll set it up."),
            (f"after the trial, {tool} won for {p}'s {purpose}", "Good choice."),
        )

    def corrected(self, subject, tool, own):
        p, (purpose, _ask) = subject
        return self.pick(
            (f"we're dropping the old choice for {p} {purpose}, switching to {tool}", "Noted the switch."),
            (f"{tool} replaces what we had for {p} {purpose}", "Updated."),
        )

    def questions(self, subject, speaker):
        p, (purpose, ask) = subject
        return [
            f"what did we decide for {p} {purpose}?",
            f"which tool did we pick for {ask} on {p}?",
            f"what are we using for the {p} {purpose}?",
            f"what did {speaker} choose for {p} {purpose}?",
            f"what was decided about {purpose} for {p}?",
            f"which option won for {p}'s {purpose}?",
        ]

    def near_miss(self, subject):
        p, (purpose, _ask) = subject
        return self.pick(
            (f"we still have to decide on {purpose} for {p}", "Let's put it on next week's agenda."),
            (f"the {p} {purpose} setup is flaky", "I'll look into it."),
        )


class Whereabouts(Kind):
    name = "where"
    personal = True

    def subject(self):
        return (self.w.person(), self.r.choice(ITEMS))

    def value(self, subject):
        return self.r.choice(PLACES)

    def stated(self, subject, place, own):
        who, item = subject
        if own:
            return self.pick(
                (f"I put my {item} in {place}", "Noted."),
                (f"my {item} is in {place} now", "OK."),
                (f"if anyone needs my {item}: {place}", "Good to know."),
            )
        return self.pick(
            (f"{who}'s {item} is in {place}", "Noted."),
            (f"found {who}'s {item}, it was in {place}", "Great, I'll tell them."),
        )

    def corrected(self, subject, place, own):
        who, item = subject
        if own:
            return (f"I moved my {item} to {place}", "Updated.")
        return (f"{who} moved the {item} to {place}", "OK.")

    def questions(self, subject, speaker):
        who, item = subject
        return [
            f"where is {who}'s {item}?",
            f"where did {who} put the {item}?",
            f"where does {who} keep their {item}?",
            f"I need {who}'s {item}, where is it?",
            f"where would {who}'s {item} be?",
            f"where was {who}'s {item} put?",
        ]

    def near_miss(self, subject):
        who, item = subject
        return self.pick(
            (f"has anyone seen {who}'s {item}?", "Not since last week."),
            (f"{who} lost the {item} again", "It'll turn up."),
        )


class Plans(Kind):
    """A person's plans and news, in everyday words: the subject is a name and a common noun."""

    name = "plans"
    personal = True
    # what, its values, how it is said (own, by another), how it is asked
    WHAT = (
        (
            "holiday",
            "lisbon|the coast|japan|the mountains|her parents' place|iceland|a lake cabin",
            ("I'm off to {v} for my holiday", "{w} is going to {v} on holiday"),
            (
                "where is {w} going on holiday?",
                "where's {w} travelling for the holidays?",
                "what are {w}'s holiday plans?",
            ),
        ),
        (
            "dentist appointment",
            "DATE",
            ("my dentist appointment is {v}", "{w} has the dentist on {v}"),
            ("when is {w}'s dentist appointment?", "when does {w} see the dentist?"),
        ),
        (
            "birthday",
            "DATE",
            ("my birthday is {v}, in case anyone asks", "{w}'s birthday is {v}"),
            ("when is {w}'s birthday?", "when was {w} born?", "what day should we celebrate {w}?"),
        ),
        (
            "new job",
            "a bank|a startup downtown|the hospital|the city council|a game studio|the university",
            ("I start my new job at {v} next month", "{w} got a new job at {v}"),
            ("where does {w} work now?", "where is {w}'s new job?", "who hired {w}?"),
        ),
        (
            "move",
            "the north side|a flat near the station|the suburbs|across town|a house with a garden",
            ("we're moving to {v}", "{w} is moving to {v}"),
            ("where is {w} moving?", "where will {w} live after the move?"),
        ),
        (
            "race",
            "DATE",
            ("my first half marathon is {v}", "{w} runs the half marathon on {v}"),
            ("when is {w}'s race?", "when is {w} running the half marathon?"),
        ),
        (
            "car",
            "the garage on main street|the dealer|a friend's workshop",
            ("my car is at {v} until thursday", "{w}'s car is being fixed at {v}"),
            ("where is {w}'s car being repaired?", "who is fixing {w}'s car?"),
        ),
        (
            "course",
            "spanish|pottery|welding|the guitar|sign language|japanese",
            ("I signed up for a {v} course", "{w} started learning {v}"),
            ("what is {w} learning?", "what course did {w} sign up for?", "which class is {w} taking?"),
        ),
    )

    def subject(self):
        return (self.w.person(), self.r.choice(self.WHAT))

    def value(self, subject):
        values = subject[1][1]
        return self.w.date() if values == "DATE" else self.r.choice(values.split("|"))

    def stated(self, subject, v, own):
        who, (_what, _values, (mine, theirs), _asks) = subject
        if own:
            return mine.format(v=v), self.pick("Noted.", "Good to know!", f"Thanks, I'll remember {v}.")
        return theirs.format(v=v, w=who), self.pick("Noted.", f"OK, {v}.")

    def corrected(self, subject, v, own):
        who, (what, _values, _said, _asks) = subject
        if own:
            return f"small change about my {what}: it's {v} now", "Updated."
        return f"{who}'s {what} changed, it's {v} now", "Updated."

    def questions(self, subject, speaker):
        who, (_what, _values, _said, asks) = subject
        return [ask.format(w=who) for ask in asks]

    def near_miss(self, subject):
        who, (what, _values, _said, _asks) = subject
        return self.pick(
            (f"{who} talked about the {what} all morning", "Sounds exciting."),
            (f"did {who} mention the {what}?", "Not to me."),
            (f"I should ask {who} about the {what}", "Good idea."),
        )


KINDS = (Plans, EventDate, Owner, BackupTarget, Setting, PetName, Preference, Decision, Whereabouts)


def _filler(w: _Writer) -> tuple[str, str]:
    r = w.r
    p, (e, _v, g, _past), s, t = r.choice(PROJECTS), r.choice(EVENTS), r.choice(SERVICES), r.choice(THINGS)
    person, item, rel = w.person(), r.choice(ITEMS), r.choice(RELATIONS)
    return r.choice(
        (
            ("thanks!", "You're welcome."),
            (f"remind me to call {person} tomorrow", "Will do."),
            (f"what did {person} say in the standup?", f"Mostly about the {p} {e}; nothing decided yet."),
            ("what's on my calendar today?", f"Two meetings: the {p} sync and a call with {person}."),
            (f"let's talk about the {p} {e} tomorrow", "Sure, I'll put it on the agenda."),
            (
                f"write a short note to {person} about the {p} {e}",
                f"Draft: Hi {person}, a quick update on the {p} {e}: we are on track.",
            ),
            (f"how do I restart the {s} service?", f"Run `systemctl restart {s}` and check the journal."),
            (f"is the {p} {s} up?", "Yes, all checks are green."),
            ("what did we decide about the backups?", "Nothing new on backups this week."),
            (f"did {person} say anything about the {t} backups?", "Not that I saw."),
            (f"the {s} logs are noisy again", f"I can lower the {s} log level if you want."),
            (f"ping {person} about {g} {p}", f"Sent {person} a message."),
            ("what's the weather tomorrow?", "Sunny in the morning, rain after four."),
            (f"why is the {p} {t} so big?", "Old snapshots; pruning would free about 40%."),
            (
                "summarise this for me: " + w.long_note(),
                f"Summary: updates on several projects; {person} has the action items.",
            ),
            (
                f"can you explain how {s} replication works?",
                f"{s} copies each write to its replicas; reads can go to any of them.",
            ),
            (f"what's a good name for a {rel}?", "Classic picks: biscuit, luna, milo."),
            (f"where can I buy a new {item}?", "The electronics shop on the corner has them."),
            (f"who wrote the {p} {s} runbook?", f"{person}, last spring."),
            (f"set a timer for {r.randrange(2, 30)} minutes", "Timer set."),
            ("what's the date today?", "It's in the top right of your screen, but: a weekday."),
            (f"how do I change the {s} settings?", f"Edit the {s} config file and reload the service."),
            (f"{person} is out sick today", "I'll move their meetings."),
            (f"where did we put the notes from the {p} {e} meeting?", "In the shared drive, folder meetings."),
        )
    )


def generate(turns: int, seed: int = 19) -> Corpus:
    """A history of `turns` turns with its questions (every paraphrase of at most 300 facts, from every age)."""
    r = random.Random(seed)
    w = _Writer(r)
    kinds = [k(w) for k in KINDS]
    slots: list[Turn | None] = [None] * turns
    facts: list[tuple] = []  # (kind, subject, [(slot, speaker)] of the turns stating the current value)
    used: set[tuple] = set()
    wanted = max(150, turns // 12)  # enough at every size for each tenth of the history to hold a sample
    tries = 0
    while len(facts) < wanted and tries < wanted * 20:
        tries += 1
        kind = r.choice(kinds)
        subject = kind.subject()
        key = (kind.name, *subject)
        first = r.randrange(turns - 1)
        if key in used or slots[first] is not None or slots[first + 1] is not None:
            continue
        used.add(key)
        steps = ["stated"] + [
            step for step, p in (("restated", 0.3), ("corrected", 0.3), ("restated", 0.2)) if r.random() < p
        ]
        places = [first]
        for _step in steps[1:]:
            later = [
                s
                for s in (r.randrange(places[-1] + 2, turns) for _ in range(4) if places[-1] + 2 < turns)
                if slots[s] is None and slots[s - 1] is None
            ]
            if later:
                places.append(min(later))
        value = kind.value(subject)
        told: list[tuple[int, str, str]] = []  # (slot, speaker, value)
        for step, slot in zip(steps, places, strict=False):
            own = kind.personal and r.random() < 0.6
            speaker = subject[0] if own else w.person()
            if step == "corrected":
                value = kind.value(subject)
                text, reply = kind.corrected(subject, value, own)
            elif step == "restated":
                text, reply = kind.restated(subject, value, own)
            else:
                text, reply = kind.stated(subject, value, own)
            lead = kind.lead_in(subject) if r.random() < 0.08 else None
            if slot + 1 >= turns:  # no room after the last turn for the statement a lead-in needs
                lead = None
            if lead is not None:  # the subject was named in the turn before: this one holds only the value
                slots[slot] = Turn(speaker, *lead)
                slot += 1
                text, reply = kind.after_lead_in(value)
            elif r.random() < 0.1:  # said in passing, inside a long paste
                text = w.long_note(text)
            slots[slot] = Turn(speaker, text, reply)
            told.append((slot, speaker, value))
        current = [(slot, speaker) for slot, speaker, v in told if v == value]
        facts.append((kind, subject, current, value))
    misses: dict[int, int] = {}
    for slot in range(turns):
        if slots[slot] is None:
            pick = r.randrange(len(facts)) if facts and r.random() < 0.2 else None
            if pick is not None and misses.get(pick, 0) < 4:  # a near miss on a subject that has a fact
                misses[pick] = misses.get(pick, 0) + 1
                kind, subject, _current, _value = facts[pick]
                text, reply = kind.said_around(kind.near_miss(subject))
            else:
                text, reply = _filler(w)
            slots[slot] = Turn(w.person(), text, reply)
    history = [t for t in slots if t is not None]
    _place_in_sessions(history, r)
    corpus = Corpus(history)
    for kind, subject, current, value in _spread(facts, turns, r):
        speaker = r.choice(current)[1]
        newest = max(slot for slot, _s in current)
        answers = [(history[slot].session, history[slot].n) for slot, _s in current]
        corpus.questions.extend(
            Question(q, answers, newest / max(1, turns - 1), kind.name, (kind.name, *subject), value)
            for q in kind.questions(subject, speaker)
        )
    return corpus


def _spread(facts: list, turns: int, r: random.Random, most: int = 300) -> list:
    """At most `most` facts, as many from each tenth of the history (by the newest
    answer), and within a tenth as many of each kind as there are."""
    tenths: list[dict[str, list]] = [{} for _ in range(10)]
    for fact in facts:
        newest = max(slot for slot, _s in fact[2])
        tenths[min(9, newest * 10 // turns)].setdefault(fact[0].name, []).append(fact)
    chosen = []
    for kinds in tenths:
        for group in kinds.values():
            r.shuffle(group)
        taken: list = []
        while len(taken) < most // 10 and any(kinds.values()):
            for name in sorted(kinds):
                if kinds[name] and len(taken) < most // 10:
                    taken.append(kinds[name].pop())
        chosen.extend(taken)
    return chosen


def _place_in_sessions(history: list[Turn], r: random.Random) -> None:
    """Sessions of 5 to 60 turns, one a day or so, with timestamps that move forward."""
    session, n, day, left = 0, 0, 0, 0
    for turn in history:
        if left == 0:
            session += 1
            day += r.choice((0, 1, 1, 2))
            left, n = r.randrange(5, 61), 0
        n += 1
        left -= 1
        month, mday = divmod(day, 28)
        year, month = divmod(month, 12)
        turn.session, turn.n = f"h{session:06d}", n
        turn.ts = f"{2024 + year}-{month + 1:02d}-{mday + 1:02d}T{8 + n // 6 % 12:02d}:{(n * 7) % 60:02d}:00Z"
