//! What is not a memory: the talk around the facts. Greetings, thanks, reactions to the other
//! person, encouragement, suggestions, hedges and sentences with too few words of their own.
//!
//! People talking to each other spend most sentences on each other ("That's awesome!", "You
//! got this!", "I'm so happy for you"), so these filters decide most of what the lane keeps.
//! They read form, not topic: second person, hedging words, reaction phrases and how many
//! specific words remain once the common ones are set aside.

use std::sync::LazyLock;

use regex::Regex;

/// Words that carry no subject matter of their own.
const STOPWORDS: &[&str] = &[
    "a",
    "an",
    "and",
    "are",
    "as",
    "at",
    "be",
    "been",
    "being",
    "but",
    "by",
    "for",
    "from",
    "has",
    "have",
    "he",
    "her",
    "his",
    "i",
    "in",
    "is",
    "it",
    "its",
    "of",
    "on",
    "or",
    "she",
    "that",
    "the",
    "their",
    "them",
    "they",
    "this",
    "to",
    "was",
    "were",
    "will",
    "with",
    "about",
    "also",
    "after",
    "all",
    "am",
    "any",
    "can",
    "did",
    "do",
    "does",
    "had",
    "him",
    "how",
    "into",
    "just",
    "like",
    "more",
    "most",
    "my",
    "not",
    "now",
    "our",
    "out",
    "over",
    "so",
    "some",
    "than",
    "then",
    "there",
    "these",
    "those",
    "through",
    "too",
    "up",
    "very",
    "we",
    "what",
    "when",
    "where",
    "which",
    "who",
    "why",
    "you",
    "your",
    "me",
    "us",
    "themself",
    "themselves",
    "others",
    "would",
    "could",
    "should",
    "while",
    "because",
    "if",
    "it's",
    "that's",
    "its",
    "there's",
    "here's",
    "what's",
    "let's",
    "i'm",
    "i've",
    "i'll",
    "i'd",
    "we're",
    "we've",
    "they're",
    "don't",
    "doesn't",
    "didn't",
    "can't",
    "cannot",
    "won't",
    "isn't",
    "wasn't",
    "aren't",
    "weren't",
    "haven't",
    "hasn't",
    "s",
    "t",
    "re",
    "ve",
    "ll",
    "d",
    "m",
];

/// Common words that say little on their own: a memory needs more than these.
const GENERIC: &[&str] = &[
    "thing",
    "things",
    "stuff",
    "way",
    "ways",
    "time",
    "times",
    "day",
    "days",
    "life",
    "people",
    "person",
    "lot",
    "lots",
    "bit",
    "kind",
    "sort",
    "part",
    "place",
    "world",
    "everything",
    "something",
    "anything",
    "nothing",
    "someone",
    "everyone",
    "anyone",
    "one",
    "ones",
    "other",
    "same",
    "new",
    "old",
    "good",
    "great",
    "nice",
    "cool",
    "awesome",
    "amazing",
    "fun",
    "happy",
    "glad",
    "sad",
    "hard",
    "easy",
    "tough",
    "big",
    "small",
    "little",
    "long",
    "short",
    "best",
    "better",
    "worse",
    "bad",
    "real",
    "really",
    "true",
    "sure",
    "right",
    "wrong",
    "own",
    "whole",
    "much",
    "many",
    "few",
    "several",
    "different",
    "special",
    "important",
    "interesting",
    "beautiful",
    "wonderful",
    "fantastic",
    "incredible",
    "excited",
    "exciting",
    "lovely",
    "sweet",
    "cute",
    "perfect",
    "crazy",
    "wild",
    "huge",
    "tiny",
    "get",
    "gets",
    "got",
    "getting",
    "make",
    "makes",
    "made",
    "making",
    "take",
    "takes",
    "took",
    "taking",
    "go",
    "goes",
    "went",
    "going",
    "gone",
    "come",
    "comes",
    "came",
    "coming",
    "see",
    "sees",
    "saw",
    "seeing",
    "seen",
    "look",
    "looks",
    "looked",
    "looking",
    "know",
    "knows",
    "knew",
    "think",
    "thinks",
    "thought",
    "thinking",
    "feel",
    "feels",
    "felt",
    "feeling",
    "want",
    "wants",
    "wanted",
    "need",
    "needs",
    "needed",
    "give",
    "gives",
    "gave",
    "giving",
    "keep",
    "keeps",
    "kept",
    "keeping",
    "let",
    "lets",
    "say",
    "says",
    "said",
    "tell",
    "told",
    "put",
    "try",
    "tries",
    "tried",
    "trying",
    "find",
    "finds",
    "found",
    "help",
    "helps",
    "helped",
    "helping",
    "mean",
    "means",
    "meant",
    "seem",
    "seems",
    "seemed",
    "show",
    "shows",
    "showed",
    "start",
    "started",
    "use",
    "used",
    "even",
    "still",
    "yet",
    "already",
    "always",
    "never",
    "ever",
    "often",
    "sometimes",
    "usually",
    "maybe",
    "quite",
    "pretty",
    "totally",
    "definitely",
    "absolutely",
    "actually",
    "basically",
    "literally",
    "honestly",
    "seriously",
    "probably",
    "lately",
    "recently",
    "soon",
    "again",
    "back",
    "away",
    "around",
    "together",
    "yeah",
    "yes",
    "no",
    "ok",
    "okay",
    "oh",
    "wow",
    "hey",
    "hi",
    "hello",
    "thanks",
    "thank",
    "please",
    "sorry",
    "love",
    "loves",
    "loved",
    "super",
    "such",
    "well",
    "lol",
    "haha",
    "gonna",
    "wanna",
    "today",
    "tonight",
    "yesterday",
    "tomorrow",
    "week",
    "month",
    "year",
    "moment",
    "means",
    "worth",
    "happened",
    "talked",
    "talk",
    "talking",
    "chat",
    "chatted",
    "catch",
    "caught",
    "last",
    "since",
    "lately",
    "ages",
    "while",
];

/// A sentence opening that addresses or answers the other person rather than telling them
/// something: suggestions, imperatives, agreement and sympathy.
static ADDRESSED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?ix)^(?:
            let's|lets|let\s+me|let\s+us|please|don't\s+(?:worry|forget|give|stop)|make\s+sure|remember\s+to
          | (?:check|look|take|keep|go|try|give|tell|imagine|think|listen|come|stay|hang|enjoy|believe|trust|have|be|do|see|wait|stick|hold)\b
          | (?:bye|goodbye|good\s+(?:night|morning|luck|job)|take\s+care|talk\s+(?:soon|later)|catch\s+(?:up|ya)|see\s+ya|cheers|congrats|congratulations|welcome)\b
          | i\s+(?:totally\s+|completely\s+|really\s+|so\s+)?(?:agree|understand|hear|get\s+it|feel\s+(?:the\s+same|that)|know\s+(?:right|what|how|that\s+feeling)|can\s+(?:imagine|relate|see|tell|totally)|bet|appreciate)\b
          | i'm\s+(?:so\s+|really\s+|very\s+|super\s+|totally\s+)?(?:glad|happy|sorry|proud|thrilled|stoked|excited\s+for|honou?red|grateful|thankful|touched|flattered|up\s+for|with\s+you)\b
          | i'm\s+(?:totally\s+|so\s+)?(?:in|down)\s*[.!]*$
          | i\s+am\s+(?:so\s+|really\s+|very\s+)?(?:glad|happy|sorry|proud|thrilled|grateful|thankful|touched)\b
          | i\s+(?:really\s+|just\s+)?hope\s+(?:you|your|u)\b
          | i'm\s+(?:always\s+|just\s+)?here\s+(?:for|to)\b|i\s+believe\s+in\s+you|(?:i'm\s+)?rooting\s+for\s+you|i\s+(?:got|have)\s+your\s+back
          | i\s+(?:love|like|adore|appreciate)\s+(?:that|this|it|those|these|how|what|the\s+idea|your)\b
          | (?:me\s+too|same\s+here|same|sounds|sound|that\s+sounds|you\s+too|no\s+worries|no\s+problem)\b
        )",
    )
    .expect("the addressed pattern is a fixed literal covered by the chatter tests")
});

/// Words that make a sentence a wish, a guess or a hypothetical rather than a fact.
static HEDGE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?ix)\b(?:would|could|should|might|maybe|perhaps|probably|possibly|wish|if|i'd|we'd
            |i\s+guess|i\s+suppose|i\s+wonder|wondering|someday|some\s+day|one\s+day
            |pretend|kidding|joking|supposedly|apparently
            |i\s+(?:think|believe|guess|feel\s+like)\s+(?:i|i'm|i've|i'll|my|we|we're)\b)\b",
    )
    .expect("the hedge pattern is a fixed literal covered by the chatter tests")
});

/// A wish stated as one ("I'd love to …", "we would like to …"): what the speaker wants, which
/// is theirs to remember, unlike a hypothetical "would".
static WISH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:i'd|we'd|i\s+would|we\s+would)\s+(?:really\s+)?(?:love|like)\s+to\b")
        .expect("the wish pattern is a fixed literal covered by the chatter tests")
});

/// The other person, or the listeners, addressed in the second person.
static SECOND_PERSON: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:you|your|yours|yourself|yourselves|you're|you've|you'll|you'd|ya|u|ur|y'all)\b")
        .expect("the pronoun pattern is a fixed literal covered by the chatter tests")
});

/// The listener as the one doing or being something: a remark about them, not the speaker's
/// statement ("you did great", "your painting is lovely"), or a second person that cannot be
/// told apart from "people in general" ("you can never be too careful").
static LISTENER_AS_SUBJECT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?ix)^\W*(?:you|your|yours)\b
          | \b(?:you're|you've|you'll|you'd|ya|u|ur|y'all|yourself|yourselves)\b
          | \byou\s+(?:\p{L}+ly\s+)?(?:are|were|have|had|can|could|should|will|would|did|do|don't|got|get|must|might|need|know|look|looked|made|make|guys|all|two|both|seem|sound|always|never|just|really|so|too|deserve|rock|go|went|find|see|feel|mean)\b
          | \b(?:when|if|as|because|since|that|what|how|where|why|while|and|but|so)\s+you\b
          | \byour\s+\p{L}+\s+(?:is|are|was|were|looks?|sounds?|seems?)\b",
    )
    .expect("the listener pattern is a fixed literal covered by the chatter tests")
});

/// Fillers a memory reads better without: asides to the listener, not part of the fact.
static FILLER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?ix),\s*(?:you\s+know|i\s+mean)\b,?|,?\s*\byou\s+know\s*[.!]*$|,?\s*\b(?:thank\s+you|lol|haha+|hehe|tbh|omg|btw)\b,?
          | \b(?:i\s+)?(?:just\s+)?want(?:ed)?\s+to\s+(?:let\s+you\s+know|tell\s+you|share\s+with\s+you|say)\s+(?:that\s+)?",
    )
        .expect("the filler pattern is a fixed literal covered by the chatter tests")
});

/// Content words a memory needs, at least, besides the speaker's name.
pub(crate) const MIN_CONTENT_WORDS: usize = 3;
/// Of those, the ones that are not common words.
pub(crate) const MIN_SPECIFIC_WORDS: usize = 1;

/// Removes fillers addressed to the listener ("you know", "lol") before the other filters
/// judge the sentence, so a fact with "you know" in it is not mistaken for a remark to them.
pub(crate) fn without_fillers(sentence: &str) -> String {
    FILLER.replace_all(sentence, "").into_owned()
}

/// Removes the other person's name where it only calls them ("…, Mel!", "Mel, I …"), so a
/// statement that ends by addressing them is still the speaker's statement.
pub(crate) fn without_vocatives(sentence: &str, others: &[String]) -> String {
    let mut text = sentence.trim().to_owned();
    if let Some((head, tail)) = text.rsplit_once(',') {
        let name = tail.trim().trim_end_matches(['.', '!', '?', ' ']);
        if !name.contains(' ') && names_another_speaker(name, others) {
            let ending: String = tail.chars().filter(|c| matches!(c, '.' | '!' | '?')).collect();
            text = format!("{head}{ending}");
        }
    }
    if let Some((head, tail)) = text.split_once(',') {
        let name = head.trim();
        if !name.contains(' ') && names_another_speaker(name, others) {
            text = tail.trim_start().to_owned();
        }
    }
    text
}

/// Whether a sentence is talk to or about the other person, a hedge, or a remark of form only.
///
/// A "you" is only kept as the object of the speaker's own statement ("I still have the scarf
/// you gave me") in a conversation with exactly one other person, who it then names.
pub(crate) fn is_chatter(sentence: &str, others: &[String]) -> bool {
    let trimmed = sentence.trim_start_matches(|c: char| !c.is_alphanumeric());
    let second_person = SECOND_PERSON.is_match(sentence);
    ADDRESSED.is_match(trimmed)
        || (second_person && (others.len() != 1 || LISTENER_AS_SUBJECT.is_match(sentence)))
        || HEDGE.is_match(&WISH.replace_all(sentence, "want to"))
        || names_another_speaker(sentence, others)
}

/// Whether the sentence names one of the other people in the conversation, or a short form of
/// their name ("Mel" for Melanie): what one speaker says about another is theirs to say, and a
/// rewrite of it would put words in the wrong mouth.
pub(crate) fn names_another_speaker(sentence: &str, others: &[String]) -> bool {
    if others.is_empty() {
        return false;
    }
    sentence
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .map(|word| word.trim_end_matches("'s"))
        .filter(|word| word.chars().count() >= 3 && word.chars().next().is_some_and(char::is_uppercase))
        .any(|word| {
            others.iter().any(|other| {
                other
                    .split_whitespace()
                    .any(|part| part == word || (part.starts_with(word) && part.chars().count() > word.chars().count()))
            })
        })
}

/// The lower-cased content words of a text: no stopwords, no one-letter words, none of the
/// words of the name `skip` (with or without a possessive).
pub(crate) fn content_words<'a>(text: &'a str, skip: &str) -> impl Iterator<Item = String> + 'a {
    let skip: Vec<String> = skip.split_whitespace().map(str::to_lowercase).collect();
    text.split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .map(|word| word.trim_matches('\'').to_lowercase())
        .filter(move |word| {
            let bare = word.strip_suffix("'s").unwrap_or(word);
            word.chars().count() > 1 && !STOPWORDS.contains(&word.as_str()) && !skip.iter().any(|name| name == bare)
        })
}

/// Whether a text says enough of its own to be a memory: enough content words besides the
/// speaker's name, and enough of them specific.
pub(crate) fn says_enough(text: &str, speaker: &str) -> bool {
    says_enough_with(text, speaker, MIN_CONTENT_WORDS, MIN_SPECIFIC_WORDS)
}

/// [`says_enough`] with the caller's numbers of content words and, of those, specific ones.
pub(crate) fn says_enough_with(text: &str, speaker: &str, min_content: usize, min_specific: usize) -> bool {
    let mut content = 0;
    let mut specific = 0;
    for word in content_words(text, speaker) {
        content += 1;
        if !GENERIC.contains(&word.as_str()) && !word.chars().all(|c| c.is_ascii_digit()) {
            specific += 1;
        }
    }
    content >= min_content && specific >= min_specific
}

#[cfg(test)]
mod tests {
    use super::*;

    fn others() -> Vec<String> {
        vec!["Melanie".to_owned()]
    }

    #[test]
    fn talk_to_the_other_person_is_chatter() {
        for sentence in [
            "That's so cool, you did great!",
            "I'm so happy for you",
            "I'm so glad to hear that.",
            "I totally agree.",
            "I love that!",
            "Let's do it sometime.",
            "Take care!",
            "Check out this pic.",
            "I hope you have a great time.",
            "I might move to Berlin.",
            "I wish I could go.",
            "Thanks, Mel, I went there too.",
            "Melanie's painting is gorgeous.",
            "Sounds like a plan.",
            "You did great!",
            "I think you're right.",
            "I made this because you asked.",
            "I know your painting is lovely.",
            "I'm here to support you.",
            "I hope you enjoy your experience!",
        ] {
            assert!(is_chatter(sentence, &others()), "{sentence}");
        }
    }

    #[test]
    fn statements_about_oneself_are_not_chatter() {
        for sentence in [
            "I went to a support group yesterday.",
            "My kids love the beach.",
            "We adopted a puppy named Max last month.",
            "I'm in a band with my cousin.",
            "I still have the scarf you gave me.",
            "I'd love to visit Japan next year.",
            "I hope to finish my novel by spring.",
            "I can't wait for the art show next month.",
        ] {
            assert!(!is_chatter(sentence, &others()), "{sentence}");
        }
        let two_others = vec!["Melanie".to_owned(), "Jon".to_owned()];
        assert!(
            is_chatter("I still have the scarf you gave me.", &two_others),
            "whose scarf?"
        );
        assert!(
            is_chatter("I still have the scarf you gave me.", &[]),
            "an unnamed listener"
        );
        assert!(
            !names_another_speaker("I met Melvin", &[]),
            "no other speaker, no clash"
        );
    }

    #[test]
    fn a_memory_needs_specific_words() {
        assert!(says_enough("Caroline went to an LGBTQ support group", "Caroline"));
        assert!(!says_enough("Caroline is so happy today", "Caroline"));
        assert!(!says_enough("Caroline's life is great", "Caroline"));
        assert!(!says_enough("", "Caroline"));
    }

    #[test]
    fn calling_the_other_person_by_name_is_not_talking_about_them() {
        assert_eq!(
            without_vocatives("I still have the necklace you gave me, Mel.", &others()),
            "I still have the necklace you gave me."
        );
        assert_eq!(without_vocatives("Melanie, I moved!", &others()), "I moved!");
        assert_eq!(
            without_vocatives("I met Anna, Melanie and Jo.", &others()),
            "I met Anna, Melanie and Jo."
        );
    }

    #[test]
    fn fillers_addressed_to_the_listener_go() {
        assert_eq!(without_fillers("I love jazz, you know, lol"), "I love jazz");
        assert_eq!(
            without_fillers("Haven't talked in days, wanted to let you know I joined a travel club!"),
            "Haven't talked in days, I joined a travel club!"
        );
        assert_eq!(
            without_fillers("I know you know it"),
            "I know you know it",
            "only an aside is a filler"
        );
    }
}
