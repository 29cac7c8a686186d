//! Shared photos: a turn may carry the caption of a picture the speaker showed (the LoCoMo
//! import appends it as `[shares a photo: …]`). The caption is what the speaker showed, not
//! something they said, so it is cut out of the text the sentence rules read and becomes a
//! memory of its own ("Caroline shared a photo of …") when the turn says the picture is of
//! something of theirs.

use std::sync::LazyLock;

use regex::Regex;

/// The caption marker, as the importer renders it; `share`, `shares` and `shared` all read.
static MARKER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\[\s*(?:shares?|shared)\s+an?\s+(?:photo|picture|image)\s*:\s*(?P<caption>[^\]]*)\]")
        .expect("the photo marker pattern is a fixed literal covered by the photo tests")
});

/// How a caption model opens a description, which the memory replaces with its own "a photo of".
static CAPTION_OPENING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^(?:there\s+is\s+|this\s+is\s+)?(?:a|an)\s+(?:close\s+up\s+|black\s+and\s+white\s+)?(?:photo|photograph|photography|picture|image|pic|snapshot)\s+of(?:\s+|$)",
    )
    .expect("the caption opening pattern is a fixed literal covered by the photo tests")
});

/// The speaker presenting a picture of their own: "here's a pic of my …", "this is my …",
/// "I made/took/painted …".
static OWN_PICTURE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?ix)\b(?:
            (?:pic|photo|picture|snap|shot|snapshot|photograph|image)\s+(?:of\s+)?(?:my|our|me|us|i|we)\b
          | (?:here's|here\s+is|this\s+is|that's|that\s+is|these\s+are|meet)\s+(?:my|our)\b
          | (?:i|we)\s+(?:just\s+)?(?:made|took|snapped|painted|drew|baked|built|cooked|knitted|crafted|designed|planted|grew|created|finished|got|bought)\b
        )",
    )
    .expect("the ownership pattern is a fixed literal covered by the photo tests")
});

/// A sentence presenting a picture: "here's a pic of …", "these are …", "check out …".
static PRESENTING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?ix)^(?:here's|here\s+is|here\s+are|this\s+is|these\s+are|check\s+out|look\s+at|take\s+a\s+look\s+at|meet)\s+
          (?:
            (?:a|an|the|this|my|our)\s+(?:pic|photo|picture|snap|shot|snapshot|photograph|image)\s+(?:of|from)\s+(?P<of>.+)
          | (?P<picture>(?:a|an|the|this|my|our)\s+(?:pic|photo|picture|snap|shot|snapshot|photograph|image)\b.+)
          | (?P<what>.+)
          )$",
    )
    .expect("the presenting pattern is a fixed literal covered by the photo tests")
});

/// The speaker's own part in what a picture shows: a first-person word.
static FIRST_PERSON: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:i|my|me|we|our|us|i'm|i've|we're|we've)\b")
        .expect("the first-person pattern is a fixed literal covered by the photo tests")
});

/// What a sentence presenting a picture says it shows.
#[derive(Debug, PartialEq)]
pub(crate) enum Presented<'a> {
    /// The picture itself, described: "a photo that reminds me of home".
    Picture(&'a str),
    /// What the picture is of: "the bench I sat on", "my lucky shoes".
    Subject(&'a str),
}

/// What a sentence presenting the turn's picture says it shows, when the speaker has a part in
/// it ("my shoes", "the kids I met"): someone else's picture is not the speaker's to describe.
pub(crate) fn presented(sentence: &str) -> Option<Presented<'_>> {
    let caps = PRESENTING.captures(sentence.trim())?;
    let found = if let Some(picture) = caps.name("picture") {
        Presented::Picture(picture.as_str())
    } else {
        Presented::Subject(caps.name("of").or_else(|| caps.name("what"))?.as_str())
    };
    let (Presented::Picture(words) | Presented::Subject(words)) = found;
    FIRST_PERSON.is_match(words).then_some(found)
}

/// A turn's text with its photo captions cut out, and the captions in order.
pub(crate) fn split_captions(content: &str) -> (String, Vec<String>) {
    let mut captions = Vec::new();
    for caps in MARKER.captures_iter(content) {
        if let Some(caption) = caps.name("caption") {
            let caption = caption.as_str().split_whitespace().collect::<Vec<_>>().join(" ");
            if !caption.is_empty() {
                captions.push(caption);
            }
        }
    }
    if captions.is_empty() {
        return (content.to_owned(), captions);
    }
    (MARKER.replace_all(content, " ").into_owned(), captions)
}

/// The memory a caption makes, when the turn's own words claim the picture.
pub(crate) fn shared_photo(speaker: &str, text: &str, caption: &str) -> Option<String> {
    if !OWN_PICTURE.is_match(text) {
        return None;
    }
    let described = CAPTION_OPENING.replace(caption.trim(), "");
    let described = described.trim().trim_end_matches(['.', '!', ' ']);
    if described.is_empty() {
        return None;
    }
    Some(format!("{speaker} shared a photo of {described}."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captions_are_cut_out_of_the_text() {
        let (text, captions) = split_captions("Look at this! [shares a photo: a photo of a dog on a beach]");
        assert_eq!(text.trim(), "Look at this!");
        assert_eq!(captions, vec!["a photo of a dog on a beach".to_owned()]);
        let (text, captions) = split_captions("No photo here [but brackets]");
        assert_eq!(text, "No photo here [but brackets]");
        assert!(captions.is_empty());
    }

    #[test]
    fn the_speakers_words_for_a_picture_say_what_it_shows() {
        assert_eq!(
            presented("Here's a pic of the bench I sat on!"),
            Some(Presented::Subject("the bench I sat on!"))
        );
        assert_eq!(
            presented("These are my lucky basketball shoes."),
            Some(Presented::Subject("my lucky basketball shoes."))
        );
        assert_eq!(
            presented("Here's a photo that reminds me of home."),
            Some(Presented::Picture("a photo that reminds me of home."))
        );
        assert_eq!(presented("Check out this sunset!"), None, "nothing of the speaker's");
        assert_eq!(presented("I went to the beach."), None);
    }

    #[test]
    fn a_claimed_picture_becomes_what_the_speaker_showed() {
        assert_eq!(
            shared_photo(
                "Jolene",
                "Here's a pic of my newest spread.",
                "a photo of a notebook with a quote on it"
            )
            .as_deref(),
            Some("Jolene shared a photo of a notebook with a quote on it.")
        );
        assert_eq!(
            shared_photo("Nate", "I made this last week!", "a photography of a bowl of soup").as_deref(),
            Some("Nate shared a photo of a bowl of soup.")
        );
        assert_eq!(shared_photo("Nate", "Wow, so cool!", "a photo of a bowl of soup"), None);
        assert_eq!(shared_photo("Nate", "I made this", "a photo of "), None);
    }
}
