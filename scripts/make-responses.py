#!/usr/bin/env python3
"""Build a corpus of extraction responses from LoCoMo observations, for processor-bench.

Each line of the output JSONL is one extraction request's outcome:
  {"session": "conv-26/session_3", "response_text": "...", "context": {"<uuid>": "<text>", ...},
   "complete_items": 9, "damage": ["cut", ...]}
response_text follows memsift's extraction output contract (a JSON array of items with text, confidence,
happens_at, expires_at, sensitive, temporal, relationship_type, related_memory_ids, consolidates_memory_ids,
linking_hints, entities, evidence_turns), one response per LoCoMo session, its items the session's observations.
The context holds up to 20 observations of earlier sessions of the same conversation, standing in for the
memories a request shows. complete_items counts the items the text holds whole (fewer than written when it is
cut), so the bench can tell a response lost whole from one that had nothing to lose; damage names what was done.

The default corpus is the one the processor's throughput has always been measured on: a deterministic tenth of
the responses fenced and pretty-printed, a twentieth each wrapped in prose, given trailing commas, or cut at
80 % of their length.

--damaged builds the second corpus: 30 % of the responses damaged the ways real models damage output (each one
or two of: cut anywhere and followed by a note, prose before and after, a fence with prose around it, single
quotes with apostrophes left inside texts, Python literals, the array wrapped in an object under some key,
comments, a byte order mark, smart quotes, trailing commas), 30 % of the items with non-ASCII text (accents,
CJK, emoji, curly apostrophes), and half of the responses in the compact form, where fields that are null,
empty or at their default are left out.

Usage: scripts/make-responses.py LOCOMO.json OUT.jsonl [--copies N] [--damaged]
"""
import argparse
import json
import random
import sys
import uuid

DAMAGED_SHARE = 0.30
NON_ASCII_SHARE = 0.30
COMPACT_SHARE = 0.50

DAMAGE_CLASSES = [
    "cut", "prose", "fence", "single_quotes", "python_literals", "wrapper", "comments", "byte_order_mark",
    "smart_quotes", "trailing_commas",
]
NOTES = [
    "\n\n(output truncated)", "\n(output truncated)", "...", "…", "\n\n[truncated]",
    "\n\nNote: I stopped here because the response reached its length limit.",
    " [continued in the next message]", "",
]
PROSE_BEFORE = [
    "Here are the memories I extracted:", "Sure! Here's the JSON (one item per fact):",
    "I found these [see below]:", "Based on the conversation, here is the list:",
    "Voilà les souvenirs extraits :",
]
PROSE_AFTER = [
    "Let me know if you need anything else.", "Hope that helps! {\"done\": true}",
    "Note: dates are in UTC [approx.], and sensitivity is a best guess.", "Ich hoffe, das hilft. 🎉",
]
WRAPPER_KEYS = ["memories", "items", "results", "facts", "extracted_memories", "data"]
ACCENTED = str.maketrans({"a": "á", "e": "é", "i": "í", "o": "ö", "u": "ü", "n": "ñ", "c": "ç"})
NON_ASCII_TAILS = [
    " 🎉", " 🐶", " ☕", " (東京)", " — 日本語で「ありがとう」", " in São Paulo", " near Zürich",
    " (Ελλάδα)", " 👩‍🍳", " and loves kimchi (김치)",
]
# Fields that the compact form may leave out, with their default.
DEFAULTS = {
    "happens_at": None, "expires_at": None, "sensitive": False, "temporal": "unknown",
    "relationship_type": None, "related_memory_ids": [], "consolidates_memory_ids": [],
    "linking_hints": [], "entities": [], "evidence_turns": [],
}


def session_items(rng, observations):
    """The items of one session, drawing from rng exactly as the corpus always has."""
    items = []
    for speaker, observed in observations.items():
        for text, evidence in observed:
            evidence = evidence if isinstance(evidence, list) else [evidence]
            items.append({
                "text": text, "confidence": round(rng.uniform(0.6, 1.0), 2),
                "happens_at": None, "expires_at": None,
                "sensitive": rng.random() < 0.2,
                "temporal": rng.choice(["durable", "one_off", "recurring", "unknown"]),
                "relationship_type": None, "related_memory_ids": [],
                "consolidates_memory_ids": [],
                "linking_hints": [i for i in [len(items) - 1] if i >= 0 and rng.random() < 0.3],
                "entities": [{"name": speaker, "kind": "PERSON"}],
                "evidence_turns": [e for e in evidence if isinstance(e, str)],
            })
    return items


def element_ends(items):
    """Where each item of json.dumps(items) ends, in characters."""
    ends, at = [], 1
    for index, item in enumerate(items):
        at += (2 if index else 0) + len(json.dumps(item, ensure_ascii=False))
        ends.append(at)
    return ends


def historical_damage(rng, items):
    """The clean corpus's text for a session: mostly plain JSON, a few fenced, in prose, comma'd or cut."""
    text = json.dumps(items, ensure_ascii=False)
    r = rng.random()
    if r < 0.10:
        return "```json\n" + json.dumps(items, indent=2, ensure_ascii=False) + "\n```", len(items), ["fence"]
    if r < 0.15:
        return "Here are the memories I extracted:\n" + text + "\nLet me know if you need more.", len(items), ["prose"]
    if r < 0.20:
        return text[:-1].replace("}, {", "},\n{") + ",]", len(items), ["trailing_commas"]
    if r < 0.23 and len(text) > 200:
        cut = int(len(text) * 0.8)
        return text[:cut], sum(end <= cut for end in element_ends(items)), ["cut"]
    return text, len(items), []


def with_non_ascii(rng, text):
    """The text made non-ASCII the ways model output is: accents, a CJK or emoji tail, curly apostrophes."""
    way = rng.randrange(3)
    if way == 0:
        words = text.split(" ")
        first = words[0].translate(ACCENTED)
        return " ".join([first if first != words[0] else words[0] + "é"] + words[1:])
    if way == 1:
        return text.rstrip(".") + rng.choice(NON_ASCII_TAILS) + "."
    return text.replace("'", "’") if "'" in text else text + " — c’est ça"


def compacted(item):
    return {key: value for key, value in item.items() if key not in DEFAULTS or value != DEFAULTS[key]}


class Writer:
    """Writes a list of items in a damaged syntax, recording where each item ends."""

    def __init__(self, quotes, python_literals, comments, trailing_commas, ensure_ascii):
        self.quotes, self.python_literals = quotes, python_literals
        self.comments, self.trailing_commas, self.ensure_ascii = comments, trailing_commas, ensure_ascii
        self.out = []
        self.length = 0

    def put(self, text):
        self.out.append(text)
        self.length += len(text)

    def string(self, text):
        if self.quotes == "double":
            self.put(json.dumps(text, ensure_ascii=self.ensure_ascii))
        elif self.quotes == "single":
            # Apostrophes stay inside, unescaped: the damage being imitated.
            self.put("'" + text.replace("\\", "\\\\") + "'")
        else:
            self.put("“" + text + "”")

    def value(self, value):
        if value is None:
            self.put("None" if self.python_literals else "null")
        elif value is True or value is False:
            self.put(("True" if value else "False") if self.python_literals else json.dumps(value))
        elif isinstance(value, (int, float)):
            self.put(json.dumps(value))
        elif isinstance(value, str):
            self.string(value)
        elif isinstance(value, list):
            self.put("[")
            for index, element in enumerate(value):
                self.put(", " if index else "")
                self.value(element)
            self.put("," if self.trailing_commas and value else "")
            self.put("]")
        else:
            self.put("{")
            for index, (key, field) in enumerate(value.items()):
                self.put(", " if index else "")
                self.string(key)
                self.put(": ")
                self.value(field)
                if self.comments and index == 0:
                    self.put(" /* from the chat */")
            self.put("," if self.trailing_commas and value else "")
            self.put("}")

    def items(self, items):
        ends = []
        self.put("[")
        for index, item in enumerate(items):
            self.put(",\n" if index else "\n")
            if self.comments:
                self.put(f"// memory {index}\n")
            self.value(item)
            ends.append(self.length)
        self.put(",\n]" if self.trailing_commas and items else "\n]")
        return ends

    def text(self):
        return "".join(self.out)


class Share:
    """Picks exactly a share of a sequence, spread evenly: the n-th call says whether the n-th one is picked."""

    def __init__(self, share):
        self.share, self.calls = share, 0

    def pick(self):
        self.calls += 1
        return int(self.calls * self.share) > int((self.calls - 1) * self.share)


def damaged_text(rng, items, damaged):
    """A damaged corpus response: its text, how many items it holds whole, and the damage done."""
    damage = rng.sample(DAMAGE_CLASSES, rng.choice([1, 1, 2])) if damaged else []
    quotes = "single" if "single_quotes" in damage else "smart" if "smart_quotes" in damage else "double"
    writer = Writer(quotes, "python_literals" in damage, "comments" in damage, "trailing_commas" in damage,
                    ensure_ascii=rng.random() < 0.2)
    if "byte_order_mark" in damage:
        writer.put("\ufeff")
    if "prose" in damage or "fence" in damage and rng.random() < 0.7:
        writer.put(rng.choice(PROSE_BEFORE) + "\n")
    if "fence" in damage:
        writer.put("```json\n")
    if "wrapper" in damage:
        writer.put("{")
        writer.string(rng.choice(WRAPPER_KEYS))
        writer.put(": ")
    ends = writer.items(items)
    if "wrapper" in damage:
        writer.put("}")
    if "fence" in damage:
        writer.put("\n```")
    if "prose" in damage or "fence" in damage and rng.random() < 0.7:
        writer.put("\n" + rng.choice(PROSE_AFTER))
    text = writer.text()
    complete = len(items)
    if "cut" in damage:
        cut = rng.randrange(1, len(text))
        text = text[:cut] + rng.choice(NOTES)
        complete = sum(end <= cut for end in ends)
    return text, complete, damage


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("locomo", help="the LoCoMo JSON file (a list of conversations with observations)")
    parser.add_argument("out", help="where to write the JSONL corpus")
    parser.add_argument("--copies", type=int, default=1, help="write the corpus this many times over")
    parser.add_argument("--damaged", action="store_true", help="build the damaged corpus (see above)")
    args = parser.parse_args()
    try:
        with open(args.locomo, encoding="utf-8") as file:
            conversations = json.load(file)
        observed = [(c["sample_id"], c["observation"]) for c in conversations]
    except (OSError, ValueError, KeyError, TypeError) as error:
        sys.exit(f"cannot read LoCoMo conversations with observations from {args.locomo}: {error}")

    rng = random.Random(7)
    damage_rng = random.Random(15)
    damaged_responses, non_ascii_items = Share(DAMAGED_SHARE), Share(NON_ASCII_SHARE)
    lines = []
    for sample_id, observations in observed:
        sessions = sorted(observations.keys(), key=lambda key: int(key.split("_")[1]))
        earlier = []
        for key in sessions:
            items = session_items(rng, observations[key])
            context = {str(uuid.UUID(int=rng.getrandbits(128), version=4)): text for text in earlier[-20:]}
            if args.damaged:
                rng.random()  # The clean corpus's damage draw, so both corpora hold the same items and contexts.
                written = [dict(item) for item in items]
                for item in written:
                    if non_ascii_items.pick():
                        item["text"] = with_non_ascii(damage_rng, item["text"])
                if damage_rng.random() < COMPACT_SHARE:
                    written = [compacted(item) for item in written]
                text, complete, damage = damaged_text(damage_rng, written, damaged_responses.pick())
            else:
                text, complete, damage = historical_damage(rng, items)
            lines.append({"session": f"{sample_id}/{key}", "response_text": text, "context": context,
                          "complete_items": complete, "damage": damage})
            earlier.extend(item["text"] for item in items)

    try:
        with open(args.out, "w", encoding="utf-8") as file:
            for _ in range(args.copies):
                for line in lines:
                    file.write(json.dumps(line, ensure_ascii=False) + "\n")
    except OSError as error:
        sys.exit(f"cannot write the corpus to {args.out}: {error}")
    n_items = sum(line["complete_items"] for line in lines) * args.copies
    n_damaged = sum(bool(line["damage"]) for line in lines) * args.copies
    print(f"{len(lines) * args.copies} responses ({n_damaged} damaged), {n_items} complete items")


if __name__ == "__main__":
    main()
