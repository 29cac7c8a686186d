//! The general rule: a speaker's own statement about themselves, rewritten as a memory.
//!
//! The rule table reads the fixed shapes of facts people tell an assistant ("I live in …");
//! people talking to each other mostly say what they did, plan, own and feel in sentences no
//! table anticipates. This rule keeps such a sentence when it has a first-person subject and
//! words of its own, and writes it in the third person with the speaker's name, its date
//! phrase resolved and its fillers gone: "I went to a support group yesterday and it was so
//! powerful!" said by Caroline on 8 May 2023 becomes "Caroline went to a support group on
//! 7 May 2023 and it was powerful."

use std::sync::LazyLock;

use chrono::NaiveDate;
use memsift_core::contract::{ExtractedEntity, ExtractedItem};
use memsift_core::status::Temporal;
use regex::Regex;

use crate::dates::{self, Tense};
use crate::{chatter, entities, photo, rules, speech, text};

/// How sure the rule is of a plain statement, and what a date or a leading subject adds.
const BASE_CONFIDENCE: f64 = 0.6;
const DATED_BONUS: f64 = 0.1;
const SUBJECT_FIRST_BONUS: f64 = 0.1;

/// At most this many shorter cuts of a sentence are tried, longest first.
const MAX_PREFIXES: usize = 3;
/// A cut shorter than this many words is a fragment, not a statement.
const MIN_PREFIX_WORDS: usize = 4;
/// A photo the speaker describes is still a picture read through words: at most this sure.
const SHOWN_CONFIDENCE: f64 = 0.6;

/// Statements longer than this many words are stories, not memories; their parts that match
/// the rule table still count.
const MAX_STATEMENT_WORDS: usize = 45;

/// Contractions written out, so a memory reads as plain prose.
const CONTRACTIONS: &[(&str, &str)] = &[
    (r"(?i)\bit's\s+been\b", "it has been"),
    (r"(?i)\bit's\b", "it is"),
    (r"(?i)\bthat's\b", "that is"),
    (r"(?i)\bthere's\b", "there is"),
    (r"(?i)\bhere's\b", "here is"),
    (r"(?i)\bwhat's\b", "what is"),
    (r"(?i)\bcan't\b", "cannot"),
    (r"(?i)\bwon't\b", "will not"),
    (r"(?i)\b(do|does|did|is|was|are|were|have|has|had)n't\b", "$1 not"),
    (r"(?i)\bthey're\b", "they are"),
    (r"(?i)\bthey've\b", "they have"),
    (r"(?i)\bgonna\b", "going to"),
    (r"(?i)\bwanna\b", "want to"),
    (r"(?i)\bgotta\b", "have to"),
];

/// Intensifiers and hedging adverbs a memory reads better without.
static INTENSIFIER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?ix)\b(?:really|super|totally|definitely|actually|literally|honestly|basically|truly|kinda|sorta|seriously|pretty\s+much)\s+
          | \b(?P<copula>is|was|are|were|been|be|feel|feels|felt|look|looks|looked|seem|seems|seemed)\s+(?:so|very|pretty|quite|extremely|incredibly)\s+",
    )
    .expect("the intensifier pattern is a fixed literal covered by the statement tests")
});

/// A sentence opening with a pronoun that points back at something said before it: it is a
/// continuation, not a standalone fact ("It taught me a lot", "They make me think of home").
static CONTINUATION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^(?:it|it's|its|this|that|that's|these|those|they|they're|their|them|he|he's|his|him|she|she's|her|there|here|such)\b",
    )
        .expect("the continuation pattern is a fixed literal covered by the statement tests")
});

/// Modal phrasing that turns a "we" sentence into advice about people in general.
static GENERAL_ADVICE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:can|can't|cannot|should|must|need\s+to|needs\s+to|have\s+to|has\s+to|got\s+to|gotta|all)\b")
        .expect("the advice pattern is a fixed literal covered by the statement tests")
});

/// A sentence whose subject "I" was left out, as chat does ("Been working on …", "Just got …"),
/// with the subject it stands for.
static SUBJECT_DROPPED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^(?:(?P<have>been)|(?P<am>gonna|working|planning|heading|thinking\s+about|trying|learning|taking|getting)|(?:just|finally|recently|also)\s+\p{L}+(?:ed|ought|ot|ent|ook|ade|ound|et|an|ew|ought)|got|went|started|finished|had|took|made|bought|tried|spent|saw|met|found|learned|learnt|joined|signed|picked|decided|visited|love|loved|enjoy|enjoyed|miss|missed|hate|can't\s+wait|cannot\s+wait)\b",
    )
    .expect("the dropped-subject pattern is a fixed literal covered by the statement tests")
});

/// "He", "she" and their forms inside a sentence stand for someone named before it ("I'm always
/// taking notes on her style"): without that sentence the memory would not say who.
static POINTS_BACK_AT_SOMEONE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:he|she|him|his|her|hers|he's|she's|himself|herself)\b")
        .expect("the pronoun pattern is a fixed literal covered by the statement tests")
});

/// A sentence that presents a picture; the photo rule says what it shows instead.
static PRESENTS_PICTURE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:here's|here\s+is|this\s+is|these\s+are|check\s+out|look\s+at|take\s+a\s+look)\b|\b(?:pic|photo|picture|snap|snapshot)\s+(?:of|i|we)\b")
        .expect("the picture pattern is a fixed literal covered by the statement tests")
});

/// Where a sentence may be cut when a later clause is what disqualifies it: a dash, a
/// semicolon, a comma, or a conjunction.
static CLAUSE_BOUNDARY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\s+[-–—]+\s+|\s*;\s+|,\s+|\s+(?:and|but|so|because|since|though|although|while|when|which)\s+")
        .expect("the clause boundary pattern is a fixed literal covered by the statement tests")
});

/// Where the tail of a statement starts: a dash, a semicolon, or a clause about how it was.
static TAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\s+[-–—]+\s+|,?\s+and\s+(?:it|that|this)\b|;\s+|,\s+(?:it|that|which|so)\b")
        .expect("the tail pattern is a fixed literal covered by the statement tests")
});

/// Trailing words that only colour the sentence ("… though", "… too", "… lol").
static TRAILING_FILLER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:,?\s+(?:though|anyway|anyways|too|as\s+well|lol|haha|hehe|tbh))+\s*$")
        .expect("the trailing filler pattern is a fixed literal covered by the statement tests")
});

/// Adverbs that only colour the fact ("Jon still has the scarf", "Joanna finally finished her
/// script", "Mel even went on a hike"), with the word after them: that word decides whether the
/// adverb carries meaning of its own ("even if", "even more"), and then it stays.
static FILLER_ADVERB: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:still|even|finally)\s+(?P<next>\p{L}+)")
        .expect("the filler adverb pattern is a fixed literal covered by the statement tests")
});

/// Words after which "still", "even" or "finally" is part of the meaning, not filler.
const MEANINGFUL_AFTER: &[&str] = &[
    "if", "though", "when", "while", "so", "as", "more", "less", "better", "worse", "after", "before", "now", "then",
];

/// Chat shorthand a memory writes out, so it reads (and is searched) as plain words.
const SHORTHAND: &[(&str, &str)] = &[
    ("fam", "family"),
    ("gf", "girlfriend"),
    ("bf", "boyfriend"),
    ("bday", "birthday"),
    ("kiddos", "kids"),
    ("doggo", "dog"),
    ("doggos", "dogs"),
    ("fave", "favorite"),
    ("convo", "conversation"),
];

static SHORTHAND_WORD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:fam|gf|bf|bday|kiddos|doggos?|fave|convo)\b")
        .expect("the shorthand pattern is a fixed literal covered by the statement tests")
});

/// "Cannot wait to …" after the speaker's name: chat's way of saying they look forward to it.
static CANNOT_WAIT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?i){SPEAKER_MARK}\s+(?:cannot|can't|can\s+not)\s+wait(?:\s+(?:to\s+(?P<verb>\p{{L}}+)|for)\b|(?P<end>[.!\s]*$))?"
    ))
    .expect("the anticipation pattern is built from fixed literals covered by the statement tests")
});

static EMOTICON: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|\s)[:;=]-?[)(DPp/\\|*]+|<3")
        .expect("the emoticon pattern is a fixed literal covered by the statement tests")
});

static COMPILED_CONTRACTIONS: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    CONTRACTIONS
        .iter()
        .map(|(pattern, replacement)| {
            (
                Regex::new(pattern).expect("contraction patterns are fixed literals covered by the statement tests"),
                *replacement,
            )
        })
        .collect()
});

/// Verbs after the speaker's name that state something lasting rather than an event.
const STATE_VERBS: &[&str] = &[
    "is",
    "has",
    "loves",
    "likes",
    "enjoys",
    "adores",
    "prefers",
    "hates",
    "owns",
    "works",
    "lives",
    "believes",
    "values",
    "knows",
    "speaks",
    "plays",
    "teaches",
    "studies",
    "volunteers",
    "collects",
];

/// Who is speaking and to whom, as the statement rule needs it.
pub(crate) struct Speaker<'a> {
    /// The name a memory opens with ("Caroline", "the user").
    pub name: &'a str,
    /// Who "we" stands for in this turn.
    pub plural: &'a str,
    /// The other people in the conversation, whose words are never this speaker's.
    pub others: &'a [String],
    /// People the speaker introduced by relation and name in this chunk, as (name, relation).
    pub acquaintances: &'a [(String, String)],
}

impl Speaker<'_> {
    /// Who "you" is: the other person, when there is exactly one.
    fn listener(&self) -> Option<&str> {
        match self.others {
            [listener] => Some(listener.as_str()),
            _ => None,
        }
    }

    /// The sentence rewritten about the speaker, with the names written as marks (see
    /// [`SPEAKER_MARK`]) so the tidying that follows cannot touch them.
    fn rewrite(&self, core: &str) -> Option<speech::Rewritten> {
        let plural = self.plural.replace(self.name, SPEAKER_MARK);
        let listener = self.listener().map(|_| LISTENER_MARK);
        speech::third_person(core, SPEAKER_MARK, &plural, listener)
            .or_else(|| speech::about_acquaintance(core, SPEAKER_MARK, self.acquaintances))
    }

    /// The tidied text with the names written back; an opening name takes a capital if its
    /// first letter has a one-letter capital ("the user" → "The user").
    pub(crate) fn unmark(&self, text: &str) -> String {
        let listener = self.listener().unwrap_or_default();
        let text = text.replace(LISTENER_MARK, listener);
        match text.strip_prefix(SPEAKER_MARK) {
            Some(rest) => format!(
                "{}{}",
                speech::capitalise_first(self.name),
                rest.replace(SPEAKER_MARK, self.name)
            ),
            None => text.replace(SPEAKER_MARK, self.name),
        }
    }
}

/// Stand-ins for the speaker's and the listener's names while a sentence is rewritten and
/// tidied: a name can be any text ("Really", ":(", "It's"), and the tidying that removes
/// intensifiers, emoticons and contractions must never reach it. Private-use characters never
/// reach the rules (`text::normalise` blanks them), so a mark cannot clash with what was said.
pub(crate) const SPEAKER_MARK: &str = "\u{E000}";
const LISTENER_MARK: &str = "\u{E001}";

/// Whether a sentence opens with a pronoun pointing back at what came before it.
pub(crate) fn carries_on(sentence: &str) -> bool {
    CONTINUATION.is_match(sentence)
}

/// The memory a sentence makes, if it is the speaker's statement about themselves; when only
/// a later clause keeps it from being one ("I made a cake with berries, maybe you'd like it",
/// "I adopted a pup last week and my days are happier with him"), the clauses before that one.
pub(crate) fn statement(
    sentence: &str,
    speaker: &Speaker<'_>,
    today: Option<NaiveDate>,
    label: &str,
) -> Option<ExtractedItem> {
    read_statement(sentence, speaker, today, label, false).or_else(|| {
        clause_prefixes(sentence)
            .take(MAX_PREFIXES)
            .find_map(|prefix| read_statement(prefix, speaker, today, label, false))
    })
}

/// What the speaker showed, from their own words for a picture the turn carries ("Here's a
/// pic of the bench I sat on"): "Deborah shared a photo of the bench Deborah sat on."
pub(crate) fn shown(
    presented: &photo::Presented<'_>,
    speaker: &Speaker<'_>,
    today: Option<NaiveDate>,
    label: &str,
) -> Option<ExtractedItem> {
    let sentence = match presented {
        photo::Presented::Picture(picture) => format!("I shared {picture}"),
        photo::Presented::Subject(what) => format!("I shared a photo of {what}"),
    };
    let mut item = read_statement(&sentence, speaker, today, label, true)?;
    item.confidence = item.confidence.min(SHOWN_CONFIDENCE);
    Some(item)
}

/// The sentence cut before each clause boundary, longest first, when the cut leaves words enough.
fn clause_prefixes(sentence: &str) -> impl Iterator<Item = &str> {
    let mut ends: Vec<usize> = CLAUSE_BOUNDARY.find_iter(sentence).map(|found| found.start()).collect();
    ends.reverse();
    ends.into_iter()
        .map(move |end| &sentence[..end])
        .filter(|prefix| prefix.split_whitespace().count() >= MIN_PREFIX_WORDS)
}

fn read_statement(
    sentence: &str,
    speaker: &Speaker<'_>,
    today: Option<NaiveDate>,
    label: &str,
    picture: bool,
) -> Option<ExtractedItem> {
    let cleaned = chatter::without_vocatives(&chatter::without_fillers(sentence), speaker.others);
    let stripped = text::strip_preamble(cleaned.trim()).trim();
    let with_subject = with_subject(stripped);
    let core = with_subject.as_deref().unwrap_or(stripped);
    if core.split_whitespace().count() > MAX_STATEMENT_WORDS
        || chatter::is_chatter(core, speaker.others)
        || (!picture && PRESENTS_PICTURE.is_match(core))
        || CONTINUATION.is_match(core)
        || POINTS_BACK_AT_SOMEONE.is_match(core)
    {
        return None;
    }
    let rewritten = speaker.rewrite(core)?;
    let tense = if rewritten.past { Tense::Past } else { Tense::NotPast };
    let hit = today.and_then(|today| dates::find_date_in(&rewritten.text, today, tense));
    // A "we" that can or should is people in general ("We should cherish …"), not the speaker.
    if !rewritten.singular && !rewritten.past && hit.is_none() && GENERAL_ADVICE.is_match(core) {
        return None;
    }
    let (dateless, dated) = match &hit {
        Some(hit) => {
            let (before, after) = (&rewritten.text[..hit.start], &rewritten.text[hit.end..]);
            // An opening date phrase is set off by a comma: "On 5 May 2023, Jon went …".
            let comma = if before.trim().is_empty() && !after.trim_start().starts_with(',') {
                ","
            } else {
                ""
            };
            (
                format!("{before} {after}"),
                format!("{before} {}{comma} {after}", hit.phrase()),
            )
        }
        None => (rewritten.text.clone(), rewritten.text.clone()),
    };
    // Two words of its own are enough, not three, when both are specific ("adopted a puppy",
    // "knees hurt") or when the statement is dated ("got a puppy two weeks ago"): the day is
    // part of what it says.
    let dateless = tidy_with(&dateless, false);
    let short = chatter::MIN_CONTENT_WORDS - 1;
    let enough = chatter::says_enough(&dateless, SPEAKER_MARK)
        || chatter::says_enough_with(&dateless, SPEAKER_MARK, short, short)
        || (hit.is_some() && chatter::says_enough_with(&dateless, SPEAKER_MARK, short, chatter::MIN_SPECIFIC_WORDS));
    if !enough {
        return None;
    }
    let text = speaker.unmark(&tidy(&dated));
    let mut item = ExtractedItem::new(
        text.clone(),
        temporal(&text, speaker.name, hit.is_some(), rewritten.past),
        vec![label.to_owned()],
    );
    let subject_first = text.to_lowercase().starts_with(&speaker.name.to_lowercase());
    item.confidence = BASE_CONFIDENCE
        + if hit.is_some() { DATED_BONUS } else { 0.0 }
        + if subject_first { SUBJECT_FIRST_BONUS } else { 0.0 };
    item.happens_at = hit.as_ref().map(dates::DateHit::iso);
    item.sensitive = rules::mentions_private_detail(core);
    item.entities = entities::entities(core, speaker.name);
    Some(item)
}

/// The sentence with the "I" chat left out put back, when it left one out.
fn with_subject(core: &str) -> Option<String> {
    let caps = SUBJECT_DROPPED.captures(core)?;
    let subject = if caps.name("have").is_some() {
        "I've"
    } else if caps.name("am").is_some() {
        "I'm"
    } else {
        "I"
    };
    let mut chars = core.chars();
    let first = chars.next()?;
    Some(format!("{subject} {}{}", first.to_lowercase(), chars.as_str()))
}

/// What a sentence that carries on the previous statement of the turn adds to it ("It has been
/// helpful for tracking their tasks" after "Jolene started a bullet journal"): a pronoun
/// opening or no first-person word at all, and words of its own.
pub(crate) struct Addition {
    /// Rewritten and tidied as a sentence of its own, since its first word may be a name whose
    /// capital must stay.
    text: String,
    happens_at: Option<String>,
    sensitive: bool,
    entities: Vec<ExtractedEntity>,
}

/// The [`Addition`] a sentence makes to the statement before it, if it carries that statement on.
pub(crate) fn elaboration(sentence: &str, speaker: &Speaker<'_>, today: Option<NaiveDate>) -> Option<Addition> {
    let cleaned = chatter::without_vocatives(&chatter::without_fillers(sentence), speaker.others);
    let core = text::strip_preamble(cleaned.trim()).trim();
    let rewritten = speaker.rewrite(core);
    let carries_on = CONTINUATION.is_match(core) || rewritten.is_none();
    if !carries_on || chatter::is_chatter(core, speaker.others) || PRESENTS_PICTURE.is_match(core) {
        return None;
    }
    let (text, past) = match rewritten {
        Some(rewritten) => (rewritten.text, rewritten.past),
        None => (
            core.to_owned(),
            core.split_whitespace()
                .any(|word| speech::is_past(&word.to_lowercase())),
        ),
    };
    let tense = if past { Tense::Past } else { Tense::NotPast };
    let hit = today.and_then(|today| dates::find_date_in(&text, today, tense));
    let text = match &hit {
        Some(hit) => format!("{} {} {}", &text[..hit.start], hit.phrase(), &text[hit.end..]),
        None => text,
    };
    chatter::says_enough(&tidy_with(&text, false), SPEAKER_MARK).then(|| Addition {
        text: speaker.unmark(&tidy(&text)),
        happens_at: hit.as_ref().map(dates::DateHit::iso),
        sensitive: rules::mentions_private_detail(core),
        entities: entities::entities(core, speaker.name),
    })
}

/// The statement without a tail that only tells how it felt or what followed ("… and it was
/// powerful", "… - so freeing"), as a memory of its own beside the whole one: the fact alone is
/// what a later question asks about. `None` when there is no such tail, when the tail holds the
/// date, or when the rest says too little.
pub(crate) fn without_tail(item: &ExtractedItem, speaker: &str) -> Option<ExtractedItem> {
    let found = TAIL.find(&item.text)?;
    let (head, tail) = item.text.split_at(found.start());
    if tail.chars().any(|c| c.is_ascii_digit()) {
        return None;
    }
    // The head is written already, names included: only its end is tidied, since a name may be
    // anything (":(") that a full tidying would take for noise.
    let text = format!("{}.", head.trim_end_matches([',', ';', ' ', '-', '–', '—']));
    if !chatter::says_enough(&text, speaker) {
        return None;
    }
    let mut short = item.clone();
    short.text = text;
    Some(short)
}

/// A statement with what the next sentence adds to it, as one memory.
pub(crate) fn join(item: &mut ExtractedItem, addition: Addition) {
    item.text = format!("{} {}", item.text, addition.text);
    item.happens_at = item.happens_at.take().or(addition.happens_at);
    item.sensitive |= addition.sensitive;
    for entity in addition.entities {
        if !item.entities.contains(&entity) {
            item.entities.push(entity);
        }
    }
}

fn temporal(text: &str, name: &str, dated: bool, past: bool) -> Temporal {
    if rules::RECURRING.is_match(text) {
        return Temporal::Recurring;
    }
    if dated || past {
        return Temporal::OneOff;
    }
    let lower = text.to_lowercase();
    let Some(rest) = lower.strip_prefix(&name.to_lowercase()) else {
        return Temporal::Unknown;
    };
    let mut words = rest.split_whitespace();
    let verb = words.next().unwrap_or("");
    // "is going to …", "is moving …": under way or planned, not a lasting state.
    let ongoing = words.next().is_some_and(|next| next.ends_with("ing"));
    if STATE_VERBS.contains(&verb) && !(verb == "is" && ongoing) {
        Temporal::Durable
    } else {
        Temporal::Unknown
    }
}

/// Writes contractions out, drops intensifiers and emoticons, and ends the sentence with a full stop.
pub(crate) fn tidy(rewritten: &str) -> String {
    tidy_with(rewritten, true)
}

/// [`tidy`], leaving the adverbs that only colour the fact when `drop_colour` is false: whether
/// a statement says enough is judged on what was said, and only the memory's wording drops them.
fn tidy_with(rewritten: &str, drop_colour: bool) -> String {
    let mut text = EMOTICON.replace_all(rewritten, " ").into_owned();
    for (pattern, replacement) in COMPILED_CONTRACTIONS.iter() {
        if pattern.is_match(&text) {
            text = pattern.replace_all(&text, *replacement).into_owned();
        }
    }
    let text = INTENSIFIER.replace_all(&text, |caps: &regex::Captures<'_>| match caps.name("copula") {
        Some(copula) => format!("{} ", copula.as_str()),
        None => String::new(),
    });
    let text = CANNOT_WAIT.replace_all(&text, |caps: &regex::Captures<'_>| match caps.name("verb") {
        Some(verb) => format!("{SPEAKER_MARK} is looking forward to {}", speech::gerund(verb.as_str())),
        None if caps.name("end").is_some() => format!("{SPEAKER_MARK} is looking forward to it."),
        None => format!("{SPEAKER_MARK} is looking forward to"),
    });
    let text = FILLER_ADVERB.replace_all(&text, |caps: &regex::Captures<'_>| {
        let next = &caps["next"];
        if !drop_colour || MEANINGFUL_AFTER.contains(&next.to_lowercase().as_str()) {
            caps[0].to_owned()
        } else {
            next.to_owned()
        }
    });
    let text = SHORTHAND_WORD.replace_all(&text, |caps: &regex::Captures<'_>| {
        let word = caps[0].to_lowercase();
        SHORTHAND
            .iter()
            .find(|(short, _)| *short == word)
            .map_or_else(|| caps[0].to_owned(), |(_, long)| (*long).to_owned())
    });
    let squashed = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace(" ,", ",")
        .replace(" .", ".");
    let body = squashed
        .trim_end_matches(['.', '!', ',', ';', ':', ' ', '-', '~', '—', '–'])
        .trim();
    let body = TRAILING_FILLER.replace(body, "");
    if body.is_empty() {
        return String::new();
    }
    format!("{}.", speech::capitalise_first(&body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(sentence: &str) -> Option<ExtractedItem> {
        let others = vec!["Melanie".to_owned()];
        let speaker = Speaker {
            name: "Caroline",
            plural: "Caroline",
            others: &others,
            acquaintances: &[("Anna".to_owned(), "sister".to_owned())],
        };
        statement(sentence, &speaker, NaiveDate::from_ymd_opt(2023, 5, 8), "D1:3")
    }

    #[test]
    fn a_past_statement_gets_its_date_and_loses_its_fillers() {
        let item = said("I went to a LGBTQ support group yesterday and it was so powerful.").unwrap();
        assert_eq!(
            item.text,
            "Caroline went to a LGBTQ support group on 7 May 2023 and it was powerful."
        );
        assert_eq!(item.happens_at.as_deref(), Some("2023-05-07"));
        assert_eq!(item.temporal, Temporal::OneOff);
        assert_eq!(item.evidence_turns, vec!["D1:3".to_owned()]);
        assert!((item.confidence - 0.8).abs() < 1e-9);
    }

    #[test]
    fn the_fact_also_stands_without_how_it_felt() {
        let item = said("I went to a LGBTQ support group yesterday and it was so powerful.").unwrap();
        let short = without_tail(&item, "Caroline").unwrap();
        assert_eq!(short.text, "Caroline went to a LGBTQ support group on 7 May 2023.");
        assert_eq!(short.happens_at, item.happens_at);
        let dated_tail = said("I painted a lake sunrise - finished it yesterday.").unwrap();
        assert_eq!(without_tail(&dated_tail, "Caroline"), None, "the tail holds the date");
        assert_eq!(
            without_tail(&said("I love painting landscapes.").unwrap(), "Caroline"),
            None
        );
    }

    #[test]
    fn a_later_clause_that_is_no_statement_is_cut_off() {
        assert_eq!(
            said("I made a dairy-free chocolate cake with berries, maybe you would like that!")
                .unwrap()
                .text,
            "Caroline made a dairy-free chocolate cake with berries."
        );
        assert_eq!(
            said("I adopted a pup from a shelter in Stamford and my days are happier with him.")
                .unwrap()
                .text,
            "Caroline adopted a pup from a shelter in Stamford."
        );
        assert_eq!(said("I would visit Paris if I could."), None, "every cut still hedges");
    }

    #[test]
    fn a_dated_event_may_be_short() {
        assert_eq!(
            said("I got a puppy two weeks ago!").unwrap().text,
            "Caroline got a puppy in the week of 24 April 2023."
        );
        assert_eq!(said("I got a puppy!"), None, "undated, too little of its own");
        assert_eq!(said("I adopted a puppy!").unwrap().text, "Caroline adopted a puppy.");
    }

    #[test]
    fn a_statement_about_someone_the_speaker_introduced_names_the_relation() {
        let item = said("Anna moved to Lisbon last month!").unwrap();
        assert_eq!(item.text, "Caroline's sister Anna moved to Lisbon in April 2023.");
        assert_eq!(
            said("Bob moved to Lisbon last month!"),
            None,
            "nobody Caroline introduced"
        );
    }

    #[test]
    fn a_wish_is_the_speakers_to_remember() {
        assert_eq!(
            said("I would love to visit Paris.").unwrap().text,
            "Caroline would love to visit Paris."
        );
    }

    #[test]
    fn lasting_statements_are_durable_and_plain_ones_unknown() {
        assert_eq!(said("I love painting landscapes.").unwrap().temporal, Temporal::Durable);
        assert_eq!(
            said("My kids are learning the violin.").unwrap().temporal,
            Temporal::Unknown
        );
        assert_eq!(
            said("I swim at the lake every Sunday.").unwrap().temporal,
            Temporal::Recurring
        );
    }

    #[test]
    fn remarks_and_words_about_others_are_not_statements() {
        for sentence in [
            "I'm so happy for you!",
            "That's awesome!",
            "I'm good.",
            "Here's a pic of my garden.",
            "Melanie and I went hiking.",
            "I would visit Paris if I could.",
            "I'm always taking notes on her style.",
            "Lots of stuff happened since we last talked.",
        ] {
            assert_eq!(said(sentence), None, "{sentence}");
        }
    }

    #[test]
    fn adverbs_that_only_colour_and_chat_shorthand_leave_the_memory() {
        assert_eq!(
            said("I still have the scarf my fam gave me.").unwrap().text,
            "Caroline has the scarf their family gave Caroline."
        );
        assert_eq!(
            said("I finally finished my first screenplay!").unwrap().text,
            "Caroline finished their first screenplay."
        );
        assert_eq!(
            said("I practice even when it rains hard.").unwrap().text,
            "Caroline practices even when it rains hard.",
            "\"even when\" is meaning, not colour"
        );
    }

    #[test]
    fn cannot_wait_is_looking_forward() {
        assert_eq!(
            said("I can't wait to see the new gallery downtown!").unwrap().text,
            "Caroline is looking forward to seeing the new gallery downtown."
        );
        assert_eq!(
            said("I can't wait for the pottery workshop next month!").unwrap().text,
            "Caroline is looking forward to the pottery workshop in June 2023."
        );
    }

    #[test]
    fn tidying_leaves_a_name_that_looks_like_a_filler_alone() {
        let others = vec!["Melanie".to_owned()];
        for name in ["Still", "Fam", "Even"] {
            let speaker = Speaker {
                name,
                plural: name,
                others: &others,
                acquaintances: &[],
            };
            let item = statement(
                "I still love hiking with my fam in the mountains.",
                &speaker,
                None,
                "D1:1",
            )
            .unwrap();
            assert_eq!(
                item.text,
                format!("{name} loves hiking with their family in the mountains.")
            );
        }
    }

    #[test]
    fn tidying_writes_out_contractions_and_ends_with_a_stop() {
        assert_eq!(
            tidy("it's been a wild ride, it's fun!!"),
            "It has been a wild ride, it is fun."
        );
        assert_eq!(tidy("Nate can't wait :) "), "Nate cannot wait.");
        assert_eq!(tidy("Nate is really super into it"), "Nate is into it.");
    }
}
