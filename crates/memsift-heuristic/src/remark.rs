//! The remark rule: what a speaker tells without saying "I" ("The view from the top was amazing
//! - the sunrise lit up the whole sky"), kept as what they said when it says a lot of its own.
//!
//! People talking to each other tell much of their news without a first-person subject; the
//! statement rule cannot rewrite those sentences about the speaker, and most of them are
//! remarks of form only ("That sounds great!"). A long one, with no pronoun pointing at the
//! listener, at someone unnamed or at something said before it, is usually an account of the
//! speaker's own: it becomes "Deborah said the view from the top was amazing …", attributed and
//! not rewritten, since the rule cannot tell whose fact it is beyond who said it.

use std::sync::LazyLock;

use chrono::NaiveDate;
use memsift_core::contract::ExtractedItem;
use memsift_core::status::Temporal;
use regex::Regex;

use crate::dates::{self, Tense};
use crate::statement::{self, SPEAKER_MARK, Speaker};
use crate::{chatter, entities, rules, speech, text};

/// A remark needs this many content words of its own: shorter ones are reactions and
/// encouragement far more often than news (measured on LoCoMo: remarks of 8 or more content
/// words matched a benchmark observation about a quarter of the time, of 3 or 4 words 7 %).
pub(crate) const MIN_REMARK_WORDS: usize = 6;

/// Half as sure as a first-person statement: whose fact it is stays unsaid.
const REMARK_CONFIDENCE: f64 = 0.4;

/// Pronouns that tie a sentence to the listener, to the speaker (the statement rule's), or to
/// someone named before it: without that context the remark says nothing sure. "It" and "they"
/// inside a sentence mostly point at what the sentence itself named; at its start they point
/// back, which [`statement::carries_on`] tells.
static POINTING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(?:i|i'm|i've|i'll|i'd|me|my|mine|myself|we|we're|we've|we'll|we'd|us|our|ours|ourselves|you|your|yours|you're|you've|you'll|you'd|yourself|ya|u|ur|he|she|him|her|his|hers|he's|she's|himself|herself)\b",
    )
    .expect("the pointing pattern is a fixed literal covered by the remark tests")
});

/// Openings that make a sentence advice, a wish or a reaction rather than an account.
static NOT_AN_ACCOUNT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^(?:let|keep|take|don't|do|enjoy|have|be|go|stay|make|try|remember|hope|glad|sounds|looks|congrats|congratulations|sorry|thanks|thank|wishing|good\s+luck|can't|cannot|gotta|wish|what|how|why|such|so)\b",
    )
    .expect("the account pattern is a fixed literal covered by the remark tests")
});

/// A verdict on something in general ("… is so important", "… can be a great way to …"): generic
/// encouragement, not news, and it matched a benchmark observation one time in twelve.
static VERDICT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(?:is|are|was|were|can\s+be|could\s+be|has\s+been|have\s+been|feels?)\s+(?:so\s+|really\s+|very\s+|such\s+|truly\s+|always\s+|just\s+)?(?:a\s+|an\s+|the\s+)?(?:great|good|important|key|essential|amazing|awesome|crucial|vital|huge|big|real|nice|cool|fun|wonderful|incredible|beautiful|inspiring|motivating|rewarding|special|tough|hard)\b",
    )
    .expect("the verdict pattern is a fixed literal covered by the remark tests")
});

/// Words at the start of a remark that read lower-cased after "said"; any other first word
/// may be a name ("Barcelona …") and keeps its capital.
fn lowercase_opening(word: &str) -> bool {
    let lower = word.to_lowercase();
    matches!(
        lower.as_str(),
        "the"
            | "a"
            | "an"
            | "some"
            | "every"
            | "each"
            | "all"
            | "most"
            | "many"
            | "much"
            | "lots"
            | "one"
            | "both"
            | "last"
            | "next"
            | "yesterday"
            | "today"
            | "tomorrow"
            | "after"
            | "before"
            | "during"
            | "since"
            | "once"
            | "being"
            | "having"
            | "getting"
            | "seeing"
            | "living"
            | "working"
            | "playing"
    ) || (lower.ends_with("ing") && lower.chars().count() > 4)
}

/// The memory a remark makes, if it is a long account with no pronoun tying it to its context.
pub(crate) fn remark(
    sentence: &str,
    speaker: &Speaker<'_>,
    today: Option<NaiveDate>,
    label: &str,
) -> Option<ExtractedItem> {
    let cleaned = chatter::without_vocatives(&chatter::without_fillers(sentence), speaker.others);
    let core = text::strip_preamble(cleaned.trim())
        .trim()
        .trim_end_matches(['.', '!', '~', ' ']);
    let first = core.split_whitespace().next()?;
    if !first.chars().next().is_some_and(char::is_alphabetic)
        || POINTING.is_match(core)
        || statement::carries_on(core)
        || NOT_AN_ACCOUNT.is_match(core)
        || VERDICT.is_match(core)
        // A past verb first is a statement whose "I" chat left out; the statement rule reads
        // those it can, and a remark would leave the doer unsaid.
        || speech::is_past(&first.to_lowercase())
        || text::is_uncertain(core)
        || chatter::is_chatter(core, speaker.others)
        || chatter::content_words(core, speaker.name).count() < MIN_REMARK_WORDS
    {
        return None;
    }
    let body = if lowercase_opening(first) {
        let mut chars = core.chars();
        let initial = chars.next()?;
        format!("{}{}", initial.to_lowercase(), chars.as_str())
    } else {
        core.to_owned()
    };
    let past = core
        .split_whitespace()
        .any(|word| speech::is_past(&word.to_lowercase()));
    let tense = if past { Tense::Past } else { Tense::NotPast };
    let hit = today.and_then(|today| dates::find_date_in(&body, today, tense));
    let body = match &hit {
        Some(hit) => format!("{} {} {}", &body[..hit.start], hit.phrase(), &body[hit.end..]),
        None => body,
    };
    let text = speaker.unmark(&statement::tidy(&format!("{SPEAKER_MARK} said {body}")));
    let temporal = if hit.is_some() {
        Temporal::OneOff
    } else {
        Temporal::Unknown
    };
    let mut item = ExtractedItem::new(text, temporal, vec![label.to_owned()]);
    item.confidence = REMARK_CONFIDENCE;
    item.happens_at = hit.as_ref().map(dates::DateHit::iso);
    item.sensitive = rules::mentions_private_detail(core);
    item.entities = entities::entities(core, speaker.name);
    Some(item)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Deborah's `sentence`, said to Jolene on 8 May 2023, is kept as.
    fn remarked(sentence: &str) -> Option<ExtractedItem> {
        let others = vec!["Jolene".to_owned()];
        let speaker = Speaker {
            name: "Deborah",
            plural: "Deborah",
            others: &others,
            acquaintances: &[],
        };
        remark(sentence, &speaker, NaiveDate::from_ymd_opt(2023, 5, 8), "D1:1")
    }

    fn said(sentence: &str) -> Option<String> {
        remarked(sentence).map(|item| item.text)
    }

    #[test]
    fn a_long_account_is_kept_as_what_the_speaker_said() {
        assert_eq!(
            said("The retreat near the lake was so peaceful and the sunrise lit up the whole sky with bright colors!")
                .as_deref(),
            Some(
                "Deborah said the retreat near the lake was peaceful and the sunrise lit up the whole sky with bright colors."
            )
        );
        assert_eq!(
            said("Barcelona has amazing architecture, tasty tapas and beaches full of friendly local people.")
                .as_deref(),
            Some(
                "Deborah said Barcelona has amazing architecture, tasty tapas and beaches full of friendly local people."
            ),
            "a first word that may be a name keeps its capital"
        );
    }

    #[test]
    fn a_date_phrase_resolves() {
        let item =
            remarked("Last Saturday the whole neighborhood cleaned the beach and planted twenty new palm trees.")
                .unwrap();
        assert_eq!(item.happens_at.as_deref(), Some("2023-05-06"));
        assert_eq!(item.temporal, Temporal::OneOff);
        assert!(item.text.contains("6 May 2023"), "{}", item.text);
        assert_eq!(item.confidence, REMARK_CONFIDENCE);
    }

    #[test]
    fn reactions_advice_pronouns_and_short_remarks_are_not_kept() {
        for sentence in [
            "That sounds like an amazing trip with lots of beautiful views and tasty local food!",
            "Your painting of the lake at sunrise is beautiful and full of warm bright colors.",
            "She spent three whole weeks hiking mountain trails across the northern national parks.",
            "It was a long and tiring drive through the mountains in heavy snow and fog.",
            "Keep pushing towards your goals, every small step counts and matters a lot.",
            "Barcelona sounds awesome!",
            "Maybe the new studio downtown could have great light, big windows and wooden floors.",
        ] {
            assert_eq!(said(sentence), None, "{sentence}");
        }
    }
}
