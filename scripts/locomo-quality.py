#!/usr/bin/env python3
"""Memory-quality figures on LoCoMo-8 from a memsift SQLite database and the LoCoMo file.

evidence coverage: the share of QA items (categories 1-4) whose evidence turns are all cited by
  stored, active memories of that conversation; `--baseline` adds the same share for every LoCoMo
  observation (what a responder replaying them offers before any dedupe).
observation recall (`--recall`): the share of LoCoMo observations recovered by a stored memory of
  the same session, where recovered means the content-word Jaccard similarity (lower-cased words,
  stopwords and the two speakers' names removed) is at least each stated threshold.

Usage: scripts/locomo-quality.py DB LOCOMO [--baseline] [--recall]
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
    return {w.strip("'") for w in words if w not in STOPWORDS and w not in names and len(w) > 1}


def main():
    db_path, locomo_path = sys.argv[1], sys.argv[2]
    samples = json.load(open(locomo_path))
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
        memories = {}
        for user, session, text in db.execute(
            """SELECT u.external_id, s.external_id, m.text FROM memories m
               JOIN users u ON u.id = m.user_id JOIN segments s ON s.id = m.source_segment_id
               WHERE m.archived_at IS NULL"""
        ):
            memories.setdefault((user, session), []).append(text)
        for threshold in (0.3, 0.5):
            recovered = total = 0
            for sample in samples:
                user = f"locomo:{sample['sample_id']}"
                conversation = sample["conversation"]
                names = {conversation["speaker_a"].lower(), conversation["speaker_b"].lower()}
                for key, observations in sample["observation"].items():
                    session = key.replace("_observation", "")
                    texts = [content_words(t, names) for t in memories.get((user, session), [])]
                    for items in observations.values():
                        for text, _ in items:
                            total += 1
                            words = content_words(text, names)
                            if any(words and len(words & t) / len(words | t) >= threshold for t in texts):
                                recovered += 1
            print(
                f"observations recovered by a memory of the same session at Jaccard >= {threshold}: "
                f"{recovered}/{total} = {100.0 * recovered / max(1, total):.1f}%"
            )


if __name__ == "__main__":
    main()
