//! Cutting one turn too long for a chunk into consecutive parts that each fit, so no request
//! passes its model's context window and no byte of what was said is left out.
//!
//! Parts are cut on character boundaries, after a whitespace character when one is near the cut
//! (a word is split only when it is longer than a part, such as a pasted blob), and sized by the
//! token count of the part as rendered, so the count a chunk is checked with is the count used.

use std::ops::Range;

use memsift_core::contract::Turn;
use memsift_core::transcript::render_turn_part;
use memsift_tokens::count_tokens;

/// The fewest tokens of text a part carries beyond its element's tags: below this, a turn's
/// label and speaker leave no useful room, and the speaker is left out.
pub(crate) const MIN_PART_TOKENS: usize = 16;

/// One element of a chunk: a whole turn, or one part of a turn too long for any chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    /// The turn's index in the segment.
    pub(crate) turn: usize,
    /// The bytes of the turn's text this element shows.
    pub(crate) bytes: Range<usize>,
    /// (k, n) when the element is the k-th of n parts.
    pub(crate) part: Option<(usize, usize)>,
    /// Whether the speaker attribute is shown (false only when the name alone would not fit).
    pub(crate) with_speaker: bool,
}

impl Piece {
    /// The whole of turn `index`.
    pub(crate) fn whole(index: usize, turn: &Turn) -> Self {
        Self {
            turn: index,
            bytes: 0..turn.content.len(),
            part: None,
            with_speaker: true,
        }
    }

    /// Appends the element to `out`.
    pub(crate) fn render(&self, turn: &Turn, out: &mut String) {
        render_turn_part(
            turn,
            &turn.content[self.bytes.clone()],
            self.part,
            self.with_speaker,
            out,
        );
    }

    /// The element's tokens on its own.
    pub(crate) fn tokens(&self, turn: &Turn) -> usize {
        let mut out = String::new();
        self.render(turn, &mut out);
        count_tokens(&out)
    }
}

/// Why a turn cannot be cut to fit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LabelTooLong;

/// Cuts turn `index`, whose whole element counts `whole_tokens`, into parts whose elements each
/// count at most `room` tokens; the speaker is left out only when with it no part could carry
/// [`MIN_PART_TOKENS`] of text.
pub(crate) fn split_turn(
    index: usize,
    turn: &Turn,
    room: usize,
    whole_tokens: usize,
) -> Result<Vec<Piece>, LabelTooLong> {
    let mut with_speaker = true;
    // The widest part marker this turn could need: a part holds at least one character.
    let widest = turn.content.chars().count().max(1);
    let framing = |with_speaker: bool| {
        let mut out = String::new();
        render_turn_part(turn, "", Some((widest, widest)), with_speaker, &mut out);
        count_tokens(&out)
    };
    if framing(true) + MIN_PART_TOKENS > room {
        with_speaker = false;
        if framing(false) + MIN_PART_TOKENS > room {
            return Err(LabelTooLong);
        }
    }
    let placeholder = Some((widest, widest));
    let count = |bytes: Range<usize>| {
        let piece = Piece {
            turn: index,
            bytes,
            part: placeholder,
            with_speaker,
        };
        piece.tokens(turn)
    };
    let text = turn.content.as_str();
    let tags = framing(with_speaker);
    // Bytes per token, first over the whole text, then over the last part cut: the first guess of
    // each cut, corrected by counting.
    let mut density = text.len() as f64 / whole_tokens.saturating_sub(tags).max(1) as f64;
    let mut ranges = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let (end, tokens) = cut_end(text, start, Fit { room, tags, density }, &count);
        if tokens > tags {
            density = (end - start) as f64 / (tokens - tags) as f64;
        }
        ranges.push(start..end);
        start = end;
    }
    if ranges.is_empty() {
        // An empty text whose tags alone were too long: one part, shown without the speaker.
        ranges.push(0..0);
    }
    let parts = ranges.len();
    Ok(ranges
        .into_iter()
        .enumerate()
        .map(|(position, bytes)| Piece {
            turn: index,
            bytes,
            part: Some((position + 1, parts)),
            with_speaker,
        })
        .collect())
}

/// What a part must fit: the room for its element, the tokens of its tags, and the bytes per
/// token expected of its text.
#[derive(Clone, Copy)]
struct Fit {
    room: usize,
    tags: usize,
    density: f64,
}

/// The end of the part that starts at `start`, with its element's tokens: the longest `count`
/// keeps within the room, found by guessing from the density, growing while the guess fits and
/// halving the gap once one does not, and taken as soon as it fills nine tenths of the room. A
/// part takes a bounded number of counts, each linear in the part, so cutting stays linear in the
/// text (usually one count a part); the part is never empty.
fn cut_end(text: &str, start: usize, fit: Fit, count: &impl Fn(Range<usize>) -> usize) -> (usize, usize) {
    let mut good = next_boundary(text, start);
    let mut good_tokens = count(start..good);
    if good_tokens > fit.room {
        // Not even one character fits beside the tags (the caller's room rules this out); one
        // character still moves the cut forward.
        return (good, good_tokens);
    }
    let full = fit.room - fit.room / 10;
    let target = fit.room.saturating_sub(fit.tags).max(1);
    let mut bad: Option<usize> = None;
    let mut end =
        floor_boundary(text, start + (target as f64 * fit.density * 0.95) as usize).max(next_boundary(text, good));
    for _ in 0..24 {
        if end <= good || bad.is_some_and(|bad| end >= bad) {
            break;
        }
        let tokens = count(start..end);
        if tokens <= fit.room {
            (good, good_tokens) = (end, tokens);
            if end == text.len() || tokens >= full {
                break;
            }
        } else {
            bad = Some(end);
        }
        end = match bad {
            None => floor_boundary(text, start + (end - start) * 5 / 4 + 4),
            Some(bad) if bad - good <= ((bad - start) / 64).max(4) => break,
            Some(bad) => floor_boundary(text, good + (bad - good) / 2),
        };
    }
    let tidy = after_whitespace(text, start, good);
    if tidy != good {
        let tokens = count(start..tidy);
        if tokens <= fit.room {
            return (tidy, tokens);
        }
    }
    (good, good_tokens)
}

/// `end`, moved back to just after a whitespace character in the last eighth of the part when
/// there is one, so words stay whole where the text has words.
fn after_whitespace(text: &str, start: usize, end: usize) -> usize {
    if end == text.len() {
        return end;
    }
    let floor = floor_boundary(text, end - (end - start) / 8);
    text[floor..end]
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_whitespace())
        .map(|(at, c)| floor + at + c.len_utf8())
        .filter(|&cut| cut > start)
        .unwrap_or(end)
}

/// The first character boundary after `at`.
fn next_boundary(text: &str, at: usize) -> usize {
    text[at..].chars().next().map_or(text.len(), |c| at + c.len_utf8())
}

/// The last character boundary at or before `at`.
fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};
    use memsift_core::status::Role;

    use super::*;

    fn turn(content: String) -> Turn {
        Turn {
            label: "t7".to_owned(),
            role: Role::User,
            speaker: Some("Ana".to_owned()),
            content,
            at: Utc.with_ymd_and_hms(2026, 3, 14, 9, 0, 0).unwrap(),
        }
    }

    #[test]
    fn parts_cover_the_text_in_order_and_each_fits() {
        for text in [
            "GATTACA".repeat(20_000),
            "the quick brown fox ".repeat(3_000),
            "日本語のテキスト🎉".repeat(2_000),
            "&<>\"".repeat(5_000),
        ] {
            let turn = turn(text);
            let whole = Piece::whole(0, &turn).tokens(&turn);
            let pieces = split_turn(0, &turn, 600, whole).unwrap();
            assert!(pieces.len() > 1);
            let mut next = 0;
            for (position, piece) in pieces.iter().enumerate() {
                assert_eq!(piece.bytes.start, next);
                assert_eq!(piece.part, Some((position + 1, pieces.len())));
                assert!(piece.tokens(&turn) <= 600, "{} tokens", piece.tokens(&turn));
                next = piece.bytes.end;
            }
            assert_eq!(next, turn.content.len());
            // Parts are not needlessly small: all but the last carry most of the room.
            let smallest = pieces[..pieces.len() - 1]
                .iter()
                .map(|piece| piece.tokens(&turn))
                .min()
                .unwrap();
            assert!(smallest > 400, "a part of {smallest} tokens");
        }
    }

    #[test]
    fn a_speaker_too_long_for_the_room_is_left_out_and_a_label_too_long_is_refused() {
        let mut long_speaker = turn("hello there ".repeat(200));
        long_speaker.speaker = Some("Ana ".repeat(400));
        let pieces = split_turn(0, &long_speaker, 300, 1_000).unwrap();
        assert!(pieces.iter().all(|piece| !piece.with_speaker));
        let mut long_label = long_speaker.clone();
        long_label.label = "x".repeat(5_000);
        assert_eq!(split_turn(0, &long_label, 300, 3_000), Err(LabelTooLong));
    }
}
