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
