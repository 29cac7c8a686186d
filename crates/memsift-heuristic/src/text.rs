//! Text plumbing for the rules: splitting turns into clauses, filtering what must never be a fact,
//! and rewriting first-person fragments into third person.

use std::sync::LazyLock;

use regex::Regex;

/// Sentences longer than this are skipped: they are rarely a clean single fact, and the cap
/// keeps the work per turn bounded whatever a user pastes.
pub(crate) const MAX_SENTENCE_CHARS: usize = 400;

/// Captured fragments longer than this make sentences nobody wants to read back as a memory.
const MAX_CAPTURE_CHARS: usize = 90;

/// Abbreviations whose trailing dot does not end a sentence.
const ABBREVIATIONS: &[&str] = &[
    "dr", "mr", "mrs", "ms", "st", "jr", "sr", "vs", "etc", "e.g", "i.e", "prof", "mt",
];

static EMOJI: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[\p{So}\p{Co}\u{FE0F}\u{200D}\u{20E3}\u{1F3FB}-\u{1F3FF}]")
        .expect("the emoji class is a fixed literal covered by the odd-input tests")
});

static PREAMBLE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?ix)^(?:
            (?:hey|hi|hello)\s+(?-i:\p{Lu}\p{L}+)\s*[,!]+\s*
          | (?:no\s+problem|not\s+a\s+problem|no\s+worries|of\s+course|besides\s+that|apart\s+from\s+that|other\s+than\s+that
              |on\s+another\s+note|on\s+a\s+different\s+note|speaking\s+of\s+which|speaking\s+of\s+that|yeah\s+so
              |since\s+(?:we|i)\s+last\s+(?:talked|chatted|spoke)|since\s+our\s+last\s+(?:chat|talk|conversation)
              |these\s+days|nowadays|at\s+the\s+moment|right\s+now
              |now|yea|oh\s+yeah|oh|ah|well|yeah|yes|yep|yup|no|nope|so|and|but|also|actually|btw|by\s+the\s+way|honestly
              |anyway|anyways|ok|okay|haha|hah|lol|wow|um|uh|hmm|hey|hi|hello|fun\s+fact|fyi|just\s+so\s+you\s+know
              |for\s+the\s+record|for\s+context|as\s+you\s+know|as\s+for\s+me|sure|right|true|totally|cool|great|awesome|nice
              |thanks|thank\s+you|thx|congrats|congratulations|aw+|omg|yay|oof|ooh|whoa|phew|gosh|sorry|indeed|exactly
              |absolutely|definitely|agreed|plus|guess\s+what|to\s+be\s+honest|i'll\s+be\s+honest|i\s+must\s+say
              |i\s+have\s+to\s+say|i\s+gotta\s+say|not\s+gonna\s+lie|i'm\s+not\s+gonna\s+lie)
            \b\s*[,!:\-]*\s+
        )+",
    )
    .expect("the preamble pattern is a fixed literal covered by the clause tests")
});

/// Where a sentence splits into independent clauses: a conjunction or comma followed by a new
/// first-person subject ("… and I work at …", "…, my wife is …").
static CLAUSE_BREAK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:,\s*(?:and|but|so|plus)?|\s+(?:and|but|so|plus))\s+(?P<next>i|i'm|im|i've|i'll|my)\b(?:\s+(?P<verb>are|were|both|together)\b)?")
        .expect("the clause pattern is a fixed literal covered by the clause tests")
});

/// A first-person clause after a remark in the same sentence ("That's so cool - I went …").
static FIRST_PERSON_TAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?:,|\s[-–—]+)\s+(?:(?:and|but|so|plus|also)\s+)?(?P<rest>(?:i|i'm|i've|i'll|my|we|we're|we've)\b.*)$",
    )
    .expect("the tail pattern is a fixed literal covered by the clause tests")
});

static FIRST_PERSON_SUBJECT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:i|i'm|im|i've|i'll|my)\b")
        .expect("the subject pattern is a fixed literal covered by the clause tests")
});

/// Sentence openings that make the whole sentence conditional or hypothetical.
static CONDITIONAL_OPENING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:if|when|whenever|unless|once|suppose|supposing|imagine|what\s+if|in\s+case)\b")
        .expect("the conditional pattern is a fixed literal covered by the skip tests")
});

/// Words that make a clause uncertain, hypothetical, wishful or hearsay; such clauses are never facts.
static UNCERTAIN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?ix)\b(?:if|maybe|perhaps|probably|possibly|might|may\s+(?:be|have|go|move|get|start|try)|could|would|should
            |i'd|i\s+wish|i\s+hope|hopefully|i\s+guess|i\s+think|i\s+suppose|i\s+wonder|wondering|not\s+sure|unsure
            |someday|some\s+day|one\s+day|thinking\s+(?:about|of)|considering|pretend|pretending|kidding|joking
            |used\s+to|no\s+longer|dreamt|dreamed|dream\s+of|they\s+say|apparently|supposedly)\b",
    )
    .expect("the uncertainty pattern is a fixed literal covered by the skip tests")
});

static FIRST_PERSON: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:myself|mine|my|me|i'm|i've|i'll|i'd|i|we're|we've|we|us|our|ours)\b")
        .expect("the pronoun pattern is a fixed literal covered by the rewrite tests")
});

static SECOND_PERSON: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:you|your|yours|yourself|yourselves|you're|you've|you'll|ya|u|ur)\b")
        .expect("the pronoun pattern is a fixed literal covered by the rewrite tests")
});

/// Everything from the first of these on is an aside, not part of the fact.
static CAPTURE_CUT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?ix)(?:\s*[,;:(\[]|\s+[-–—]\s|\s+(?:because|cause|since|but|though|although|which|who|whenever|while|so\s+that
            |especially|except|lol|haha|tbh|honestly|as\s+well\s+as)\b)",
    )
    .expect("the cut pattern is a fixed literal covered by the rewrite tests")
});

/// Trailing filler that adds nothing to a fact.
static CAPTURE_TAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:\s+(?:too|as\s+well|a\s+lot|so\s+much|very\s+much|though|anyway|anymore|also|really))+$")
        .expect("the tail pattern is a fixed literal covered by the rewrite tests")
});

/// Fragments that point at the conversation itself ("it", "that", "this song") or at the moment,
/// so they would be meaningless or stale as a stored memory.
static DEICTIC: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?ix)\b(?:it|it's|its|this|that|these|those|them|him|her|his|he|she|they|their|here|there|now|today|tonight
            |yesterday|tomorrow|yet|right\s+now|at\s+the\s+moment|currently\s+reading|anything|everything|something|stuff)\b",
    )
    .expect("the deictic pattern is a fixed literal covered by the rewrite tests")
});

/// A fragment that stops on a function word was cut mid-phrase ("loves to").
static DANGLING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:^|\s)(?:to|and|or|the|a|an|of|with|for|in|on|at|by|from|about|like|than|as)$")
        .expect("the dangling pattern is a fixed literal covered by the rewrite tests")
});

/// Replaces typographic quotes and emoji so the rules see plain text.
pub(crate) fn normalise(content: &str) -> String {
    let replaced: String = content
        .chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' | '\u{02BC}' => '\'',
            '\u{201C}' | '\u{201D}' => '"',
            '\t' | '\r' => ' ',
            other => other,
        })
        .collect();
    EMOJI.replace_all(&replaced, " ").into_owned()
}

/// Splits text into sentences, keeping each sentence's terminator so questions stay recognisable.
///
/// A dot only ends a sentence when whitespace or the end follows it, so versions like `3.12`
/// survive, and common abbreviations ("Dr.") do not end one.
pub(crate) fn sentences(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut current = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\n' || c == ';' {
            push_sentence(&mut found, &mut current);
            continue;
        }
        current.push(c);
        if matches!(c, '.' | '!' | '?') {
            // Runs like "?!" or "..." belong to the same terminator.
            while let Some(&next) = chars.peek() {
                if matches!(next, '.' | '!' | '?') {
                    current.push(next);
                    chars.next();
                } else {
                    break;
                }
            }
            let at_boundary = chars.peek().is_none_or(|next| next.is_whitespace() || *next == '"');
            if at_boundary && !(c == '.' && ends_with_abbreviation(&current)) {
                push_sentence(&mut found, &mut current);
            }
        }
    }
    push_sentence(&mut found, &mut current);
    found
}

fn push_sentence(found: &mut Vec<String>, current: &mut String) {
    let sentence = current.split_whitespace().collect::<Vec<_>>().join(" ");
    current.clear();
    if !sentence.is_empty() {
        found.push(sentence);
    }
}

fn ends_with_abbreviation(sentence: &str) -> bool {
    let without_dot = sentence.trim_end_matches('.');
    let last_word = without_dot.rsplit(|c: char| c.is_whitespace()).next().unwrap_or("");
    ABBREVIATIONS.contains(&last_word.to_ascii_lowercase().as_str())
}

/// Whether a whole sentence must be skipped: questions and conditionals.
pub(crate) fn skip_sentence(sentence: &str) -> bool {
    let trimmed = sentence.trim_end_matches(['"', '\'', ')', ' ']);
    trimmed.ends_with('?')
        || trimmed.contains("?")
        || trimmed.chars().count() > MAX_SENTENCE_CHARS
        || CONDITIONAL_OPENING.is_match(strip_preamble(trimmed))
}

/// Whether a clause is hedged, hypothetical or hearsay.
pub(crate) fn is_uncertain(clause: &str) -> bool {
    UNCERTAIN.is_match(clause)
}

/// Removes interjections and greetings in front of the fact ("Oh, btw, I live …").
pub(crate) fn strip_preamble(text: &str) -> &str {
    match PREAMBLE.find(text) {
        Some(found) => &text[found.end()..],
        None => text,
    }
}

/// Splits a sentence into clauses that each start with their own first-person subject, and
/// strips preambles and terminal punctuation from each.
pub(crate) fn clauses(sentence: &str) -> Vec<String> {
    let sentence = strip_preamble(sentence);
    let mut starts = vec![0];
    for caps in CLAUSE_BREAK.captures_iter(sentence) {
        let (Some(whole), Some(next)) = (caps.get(0), caps.name("next")) else {
            continue;
        };
        // "My girlfriend, Toby and I are …" is one compound subject, not two clauses.
        if caps.name("verb").is_some() {
            continue;
        }
        let previous_start = starts.last().copied().unwrap_or(0);
        // An opener without a subject of its own ("Every morning, I …") belongs to the clause it introduces.
        if !FIRST_PERSON_SUBJECT.is_match(&sentence[previous_start..whole.start()]) {
            continue;
        }
        starts.push(next.start());
    }
    let mut found = Vec::new();
    for (index, &start) in starts.iter().enumerate() {
        let end = starts.get(index + 1).copied().unwrap_or(sentence.len());
        let mut piece = sentence[start..end].trim();
        if index + 1 < starts.len() {
            // The break pattern leaves the joining word on the previous clause.
            for joiner in [" and", " but", " so", " plus", ","] {
                piece = piece.strip_suffix(joiner).unwrap_or(piece).trim_end();
            }
        }
        let piece = strip_preamble(piece)
            .trim_end_matches(['.', '!', ',', ' ', '"', '~'])
            .trim();
        if !piece.is_empty() {
            found.push(piece.to_owned());
        }
    }
    found
}

/// The first-person clause that follows a remark in the same sentence, if one does.
pub(crate) fn first_person_tail(sentence: &str) -> Option<&str> {
    FIRST_PERSON_TAIL
        .captures(sentence)
        .and_then(|caps| caps.name("rest"))
        .map(|rest| rest.as_str())
}

/// Cleans a captured fragment into something a memory sentence can embed, or refuses it.
///
/// Asides after a comma or "because" are cut, filler is trimmed, "my"/"me" become
/// "their"/"them", and fragments that still need the conversation to make sense are refused.
pub(crate) fn clean_capture(raw: &str) -> Option<String> {
    let cut = match CAPTURE_CUT.find(raw) {
        Some(found) => &raw[..found.start()],
        None => raw,
    };
    let trimmed = cut.trim().trim_end_matches(['.', '!', ',', ' ', '"', '\'', '-', '~']);
    let trimmed = CAPTURE_TAIL.replace(trimmed, "");
    let trimmed = trimmed.trim();
    if trimmed.is_empty() || trimmed.chars().count() > MAX_CAPTURE_CHARS || trimmed.split_whitespace().count() > 12 {
        return None;
    }
    if SECOND_PERSON.is_match(trimmed) || DEICTIC.is_match(trimmed) || DANGLING.is_match(trimmed) {
        return None;
    }
    third_person_pronouns(trimmed)
}

/// Rewrites "my"/"me"/"mine"/"myself" and refuses fragments with a first-person subject or plural,
/// whose rewrite would need grammar this lane does not attempt.
fn third_person_pronouns(fragment: &str) -> Option<String> {
    let mut refused = false;
    let rewritten = FIRST_PERSON.replace_all(fragment, |caps: &regex::Captures<'_>| {
        let word = caps.get(0).map_or("", |m| m.as_str()).to_ascii_lowercase();
        match word.as_str() {
            "my" => "their".to_owned(),
            "me" => "them".to_owned(),
            "mine" => "theirs".to_owned(),
            "myself" => "themself".to_owned(),
            _ => {
                refused = true;
                String::new()
            }
        }
    });
    if refused { None } else { Some(rewritten.into_owned()) }
}

/// The third-person singular of a verb phrase's first word ("love" → "loves", "don't like" →
/// "doesn't like"); past forms and modals are left alone.
pub(crate) fn third_person_verb(phrase: &str) -> String {
    let mut words = phrase.splitn(2, ' ');
    let first = words.next().unwrap_or("");
    let rest = words.next();
    let lower = first.to_ascii_lowercase();
    let converted = match lower.as_str() {
        "don't" | "dont" => "doesn't".to_owned(),
        "do" if rest.is_some_and(|r| r.starts_with("not")) => "does".to_owned(),
        "am" | "'m" => "is".to_owned(),
        "have" => "has".to_owned(),
        "do" => "does".to_owned(),
        "go" => "goes".to_owned(),
        "can't" | "cannot" | "can" | "won't" | "will" | "must" | "shall" => lower.clone(),
        word if word.ends_with("ed") || word.ends_with("es") && word.len() > 4 => lower.clone(),
        word if ["s", "sh", "ch", "x", "z", "o"].iter().any(|end| word.ends_with(end)) => format!("{word}es"),
        word if word.ends_with('y') && !word.ends_with("ay") && !word.ends_with("ey") && !word.ends_with("oy") => {
            format!("{}ies", &word[..word.len() - 1])
        }
        word => format!("{word}s"),
    };
    match rest {
        Some(rest) => format!("{converted} {rest}"),
        None => converted,
    }
}

/// "a" or "an" in front of a noun phrase, by its first letter (close enough for job titles and foods).
pub(crate) fn with_article(noun_phrase: &str) -> String {
    let starts_with_vowel = noun_phrase.chars().next().is_some_and(|c| "aeiouAEIOU".contains(c));
    if starts_with_vowel {
        format!("an {noun_phrase}")
    } else {
        format!("a {noun_phrase}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_split_on_terminators_but_keep_versions_and_abbreviations() {
        assert_eq!(
            sentences("Hi! I use Python 3.12 daily. Dr. Smith is my doctor?! ok\nnew line"),
            vec![
                "Hi!",
                "I use Python 3.12 daily.",
                "Dr. Smith is my doctor?!",
                "ok",
                "new line"
            ]
        );
    }

    #[test]
    fn normalising_plain_quotes_and_emoji() {
        assert_eq!(normalise("I\u{2019}m \u{201C}ok\u{201D} 🙂👍🏽"), "I'm \"ok\"    ");
    }

    #[test]
    fn clauses_split_on_a_new_first_person_subject_and_drop_preambles() {
        assert_eq!(
            clauses("Oh, btw, I live in Boston and I work at Acme, my wife is Ann."),
            vec!["I live in Boston", "I work at Acme", "my wife is Ann"]
        );
        assert_eq!(
            clauses("Hey Mel! I love hiking and camping."),
            vec!["I love hiking and camping"]
        );
        assert_eq!(
            clauses("Every morning, I walk my dog"),
            vec!["Every morning, I walk my dog"]
        );
        assert_eq!(
            clauses("I love jazz and I hate cilantro"),
            vec!["I love jazz", "I hate cilantro"]
        );
        assert_eq!(
            clauses("My wife, Ann and I are going"),
            vec!["My wife, Ann and I are going"]
        );
    }

    #[test]
    fn discourse_openers_are_preambles() {
        for (sentence, rest) in [
            ("Now, I'm aiming to open a studio.", "I'm aiming to open a studio."),
            ("On another note, I upgraded my desk.", "I upgraded my desk."),
            ("Speaking of which, I adopted a pup.", "I adopted a pup."),
            ("No worries, I found the keys.", "I found the keys."),
            ("Since we last talked, I moved to Lyon.", "I moved to Lyon."),
            ("Nowadays I paint.", "I paint."),
            ("These days I live in Porto.", "I live in Porto."),
            ("Nowhere is like home.", "Nowhere is like home."),
        ] {
            assert_eq!(strip_preamble(sentence), rest, "{sentence}");
        }
    }

    #[test]
    fn a_first_person_clause_is_found_after_a_remark() {
        assert_eq!(
            first_person_tail("That's so cool - I went to a concert too"),
            Some("I went to a concert too")
        );
        assert_eq!(
            first_person_tail("Wow, my kids would love that"),
            Some("my kids would love that")
        );
        assert_eq!(first_person_tail("That is so cool"), None);
    }

    #[test]
    fn captures_are_cut_rewritten_or_refused() {
        assert_eq!(
            clean_capture("hiking with my dog, it relaxes me").as_deref(),
            Some("hiking with their dog")
        );
        assert_eq!(clean_capture("call me Sam").as_deref(), Some("call them Sam"));
        assert_eq!(clean_capture("it"), None);
        assert_eq!(clean_capture("your idea"), None);
        assert_eq!(clean_capture("when I cook"), None);
        assert_eq!(clean_capture("jazz too").as_deref(), Some("jazz"));
        assert_eq!(clean_capture("to, you know"), None);
    }

    #[test]
    fn verbs_take_the_third_person() {
        let cases = [
            ("love", "loves"),
            ("watch", "watches"),
            ("study", "studies"),
            ("play", "plays"),
            ("don't like", "doesn't like"),
            ("do not eat", "does not eat"),
            ("can't stand", "can't stand"),
            ("have", "has"),
            ("go", "goes"),
        ];
        for (verb, expected) in cases {
            assert_eq!(third_person_verb(verb), expected);
        }
    }
}
