#!/usr/bin/env python3
"""Memory-quality figures on LoCoMo-8 from a memsift SQLite database and the LoCoMo file.

evidence coverage: the share of QA items (categories 1-4) whose evidence turns are all cited by
  stored, active memories of that conversation; `--baseline` adds the same share for every LoCoMo
  observation (what a responder replaying them offers before any dedupe).
observation recall (`--recall`): the share of LoCoMo observations recovered by a stored memory of
  the same session, where recovered means the content-word Jaccard similarity (lower-cased words,
  stopwords and the two speakers' names, possessive or not, removed) is at least each stated
  threshold; then the precision (the share of memories that match some observation of their
  session at that threshold) and the count (memories per observation).
`--ceiling`: what sentence-level extraction can reach at all: the share of observations that one
  sentence of the turns they cite matches at Jaccard >= 0.3 (first-person words set aside, as a
  third-person rewrite would), and the share of first-person sentences of cited turns that match
  some observation of their session (a precision no choice of turns can beat). DB is not read.
`--memories FILE`: read the memories from the JSON lines the heuristic bench writes
  (`cargo bench -p memsift-heuristic --bench throughput -- LOCOMO --dump FILE`) instead of a
  database: the lane's own output, before the processor's dedupe. DB is then not read (pass -).

Usage: scripts/locomo-quality.py DB LOCOMO [--baseline] [--recall] [--memories FILE] [--ceiling]
"""
import json
import re
import sqlite3
import sys

STOPWORDS = set(
    "a an and are as at be been but by for from has have he her his i in is it its of on or she that the "
    "their them they this to was were will with about also after all am any can did do does had him how into "
    "just like more most my not now our out over so some than then there these those through too up very we "
    "what when where which who why you your user users".split()
)


def content_words(text, names):
    words = re.findall(r"[a-z0-9']+", text.lower())
    # "Caroline's" is the name too: a possessive must not count as a content word on either side.
    return {
        w.strip("'")
        for w in words
        if w not in STOPWORDS and w not in names and len(w) > 1 and not (w.endswith("'s") and w[:-2] in names)
    }


def stored_memories(db):
    memories = {}
    for user, session, text in db.execute(
        """SELECT u.external_id, s.external_id, m.text FROM memories m
           JOIN users u ON u.id = m.user_id JOIN segments s ON s.id = m.source_segment_id
           WHERE m.archived_at IS NULL"""
    ):
        memories.setdefault((user, session), []).append(text)
    return memories


def dumped_memories(path):
    memories = {}
    with open(path) as lines:
        for line in lines:
            row = json.loads(line)
            memories.setdefault((row["user"], row["segment"]), []).append(row["memory"]["text"])
    return memories


def recall_and_precision(samples, memories):
    n_memories = sum(len(texts) for texts in memories.values())
    for threshold in (0.3, 0.5):
        recovered = total = matching = 0
        for sample in samples:
            user = f"locomo:{sample['sample_id']}"
            conversation = sample["conversation"]
            names = {conversation["speaker_a"].lower(), conversation["speaker_b"].lower()}
            for key, observations in sample["observation"].items():
                session = key.replace("_observation", "")
                texts = [content_words(t, names) for t in memories.get((user, session), [])]
                observed = [content_words(text, names) for items in observations.values() for text, _ in items]
                for words in observed:
                    total += 1
                    if any(words and len(words & t) / len(words | t) >= threshold for t in texts):
                        recovered += 1
                for t in texts:
                    if any(t and len(words & t) / len(words | t) >= threshold for words in observed):
                        matching += 1
        print(
            f"observations recovered by a memory of the same session at Jaccard >= {threshold}: "
            f"{recovered}/{total} = {100.0 * recovered / max(1, total):.1f}%"
        )
        print(
            f"memories matching an observation of their session at Jaccard >= {threshold}: "
            f"{matching}/{n_memories} = {100.0 * matching / max(1, n_memories):.1f}%"
        )
    print(f"memories: {n_memories}, {n_memories / max(1, total):.2f} per observation")


FIRST_PERSON = {"i'm", "i've", "i'll", "i'd", "me", "myself", "mine"}


def sentences(text):
    return [part for part in re.split(r"(?<=[.!?])\s+|\n+", text) if part.strip()]


def ceiling(samples):
    reachable = total = first_person = matching = 0
    jaccard = lambda a, b: len(a & b) / len(a | b) if a and b else 0.0
    for sample in samples:
        conversation = sample["conversation"]
        names = {conversation["speaker_a"].lower(), conversation["speaker_b"].lower()}
        turns = {t["dia_id"]: t for k, v in conversation.items() if k.startswith("session_") and isinstance(v, list) for t in v}
        for observations in sample["observation"].values():
            observed = [content_words(text, names) for items in observations.values() for text, _ in items]
            cited = set()
            for items in observations.values():
                for text, dia in items:
                    total += 1
                    ids = [dia] if isinstance(dia, str) else dia
                    cited.update(ids)
                    words = content_words(text, names)
                    best = max(
                        (jaccard(words, content_words(s, names) - FIRST_PERSON)
                         for d in ids if d in turns for s in sentences(turns[d]["text"])),
                        default=0.0,
                    )
                    reachable += best >= 0.3
            for dia in cited:
                for s in sentences(turns[dia]["text"]) if dia in turns else []:
                    if s.rstrip().endswith("?") or not re.match(r"(?i)\W*(i|i'm|i've|i'll|my|we|we're|we've)\b", s):
                        continue
                    words = content_words(s, names) - FIRST_PERSON
                    if len(words) < 3:
                        continue
                    first_person += 1
                    matching += any(jaccard(words, o) >= 0.3 for o in observed)
    print(f"observations one sentence of their cited turns matches at Jaccard >= 0.3: {reachable}/{total} = {100.0 * reachable / max(1, total):.1f}%")
    print(
        f"first-person sentences of cited turns matching an observation of their session: "
        f"{matching}/{first_person} = {100.0 * matching / max(1, first_person):.1f}%"
    )


def main():
    db_path, locomo_path = sys.argv[1], sys.argv[2]
    samples = json.load(open(locomo_path))
    if "--ceiling" in sys.argv:
        ceiling(samples)
        return
    if "--memories" in sys.argv:
        recall_and_precision(samples, dumped_memories(sys.argv[sys.argv.index("--memories") + 1]))
        return
    db = sqlite3.connect(db_path)
    cited = {}
    for user, dia_id in db.execute(
        """SELECT u.external_id, msg.external_id FROM memories m
           JOIN users u ON u.id = m.user_id
           JOIN memory_evidence e ON e.memory_id = m.id
           JOIN messages msg ON msg.id = e.message_id
           WHERE m.archived_at IS NULL AND msg.external_id IS NOT NULL"""
    ):
        cited.setdefault(user, set()).add(dia_id)

    def coverage(cited_of):
        covered = total = 0
        for sample in samples:
            have = cited_of(sample)
            for qa in sample["qa"]:
                if qa.get("category") not in (1, 2, 3, 4) or not qa.get("evidence"):
                    continue
                total += 1
                evidence = {e.strip() for item in qa["evidence"] for e in re.split(r"[;,]\s*", item) if e.strip()}
                covered += evidence <= have
        return covered, total

    covered, total = coverage(lambda s: cited.get(f"locomo:{s['sample_id']}", set()))
    print(f"QA evidence coverage, stored active memories: {covered}/{total} = {100.0 * covered / max(1, total):.1f}%")
    if "--baseline" in sys.argv:

        def observed(sample):
            ids = set()
            for observations in sample["observation"].values():
                for items in observations.values():
                    for _, dia in items:
                        ids.update([dia] if isinstance(dia, str) else dia)
            return ids

        covered, total = coverage(observed)
        print(f"QA evidence coverage, every LoCoMo observation: {covered}/{total} = {100.0 * covered / max(1, total):.1f}%")
    if "--recall" in sys.argv:
        recall_and_precision(samples, stored_memories(db))


if __name__ == "__main__":
    main()
